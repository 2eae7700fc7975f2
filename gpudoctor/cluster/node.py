"""What a node tells rank 0 (its own verdict, figures, software and network), and what rank 0 tells each node
back: its verdict about it, which the node's own report and exit code carry, so a per-node hook drains
exactly the nodes rank 0 names."""

from __future__ import annotations

from typing import Any

from gpudoctor.cluster.env import ClusterEnv
from gpudoctor.judging import nics
from gpudoctor.judging.hardware import gpu_model
from gpudoctor.model import Result, Status

VERDICT_CHECK = "cluster.verdict"


def node_report(
    env: ClusterEnv, document: dict[str, Any], facts: dict[str, Any], cluster_checks: list[str]
) -> dict[str, Any]:
    """What a node tells rank 0: its own verdict and checks, its figures, its software and its network."""
    checks = document["checks"]
    return {
        "name": env.node,
        "rank": env.rank,
        "status": document["status"],
        "exit_code": document["exit_code"],
        "checks": checks,
        "causes": document.get("causes") or [],
        "failing": [c["check_id"] for c in checks if c["status"] in ("fail", "error", "timeout")],
        "warning": [c["check_id"] for c in checks if c["status"] == "warn"],
        "figures": judged_figures(checks),
        "software": software(facts),
        "infiniband": (facts.get("system") or {}).get("infiniband") or [],
        "network": network(facts),
        "cluster_checks": cluster_checks,
    }


def network(facts: dict[str, Any]) -> dict[str, Any]:
    """What carries this node's traffic to the others: the RDMA ports NCCL would use (and why the rest are
    left out), and the multi-node NVLink domain its GPUs share (an NVL72 rack), with its GPUs' count and model."""
    nvml, system = facts.get("nvml") or {}, facts.get("system") or {}
    gpus = nvml.get("gpus") or []
    numa = {n for n in (system.get("gpu_numa_nodes") or {}).values() if isinstance(n, int)}
    used, left = nics.nccl_nics(system.get("infiniband") or [], numa, system.get("env") or {})
    fabrics = [g.get("fabric") or {} for g in gpus]
    domains = {f"{f.get('cluster_uuid')}/{f.get('clique_id')}" if f.get("cluster_uuid") else None for f in fabrics}
    return {
        "nics": [{"device": str(p.get("device")), "port": p.get("port"), "gbits": p["gbits"]} for p in used],
        "left_out": left,
        "nvlink_domain": domains.pop() if len(domains) == 1 else None,
        "gpus": len(gpus),
        "model": (gpu_model(gpus[0]) or {}).get("model") if gpus else None,
    }


def judged_figures(checks: list[dict[str, Any]]) -> dict[str, float]:
    """The node's figures that its own checks judged against the hardware's expectation or a saved baseline
    (`check:figure` -> value). Figures a node does not judge (gloo on the CPU measures the host) are not
    compared across nodes either."""
    return {
        f"{c['check_id']}:{m['name']}": m["value"]
        for c in checks
        for m in c["metrics"]
        if m["baseline"] and m["expected"] is not None and isinstance(m["value"], int | float)
    }


SKEW_PREFIXES = ("NCCL_", "GLOO_", "TORCH_")
BY_DESIGN = ("_SOCKET_IFNAME",)  # interface names differ between nodes by design


def software(facts: dict[str, Any]) -> dict[str, Any]:
    """What must be the same on every node: versions and the distributed settings."""
    nvml, torch, system = facts.get("nvml") or {}, facts.get("torch") or {}, facts.get("system") or {}
    env = system.get("env") or {}
    return {
        "versions": {
            "driver": nvml.get("driver_version"),
            "cuda driver": nvml.get("cuda_driver_version"),
            "torch": torch.get("version"),
            "torch CUDA": torch.get("cuda"),
            "NCCL": (torch.get("nccl") or {}).get("version"),
            "cuDNN": (torch.get("cudnn") or {}).get("version"),
            "torchvision": (torch.get("torchvision") or {}).get("version"),
        },
        "settings": {k: v for k, v in env.items() if k.startswith(SKEW_PREFIXES) and not k.endswith(BY_DESIGN)},
    }


def verdicts(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Rank 0's verdict about every node of a cluster report, by node name."""
    return {node["name"]: node["verdict"] for node in document["cluster"]["nodes"]}


def verdict_result(verdict: dict[str, Any] | None, leader: str) -> Result:
    """A node's own row for what rank 0 concluded about it."""
    if verdict is None:
        status, text = Status.WARN, f"no verdict from rank 0 on {leader}: it ended or went silent first"
    elif verdict["status"] == Status.PASS.value:
        status, text = Status.PASS, f"rank 0 on {leader} names no fault on this node"
    else:
        status = Status(verdict["status"])
        said = "; ".join(verdict["findings"][:3]) or "see rank 0's cluster report"
        text = f"rank 0 on {leader} names this node ({'drain it' if status == Status.FAIL else 'not drained'}): {said}"
    return Result(status, text, check_id=VERDICT_CHECK, title="Rank 0's verdict on this node")
