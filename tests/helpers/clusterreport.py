"""A synthetic rank 0 cluster report of any size, built by the same `document.build_cluster` a cluster run
uses: the first look's ring transfers (every node to ranks -2, -1, +1, +2), one slow node named and confirmed,
one slow link, an NCCL skew, a node failing its own checks, a lost node, and host names and plugin text
written to attack an HTML page."""

from __future__ import annotations

import random
from typing import Any

from gpudoctor.model import Metric, Remediation, Result, Row, Status
from gpudoctor.report import document

HOSTILE_NAME = '"><img src=x onerror="window.pwned=1">'
HOSTILE_SCRIPT = "node<script>window.pwned=2</script>"
HOSTILE_TEXT = "<script>window.pwned=3</script><b onmouseover=window.pwned=4>bold</b>"
GBPS = 10.0


def names(n: int) -> list[str]:
    listed = [f"node{k:04d}" for k in range(n)]
    listed[3], listed[4] = HOSTILE_NAME, HOSTILE_SCRIPT
    return listed


def build(n: int = 1000) -> dict[str, Any]:
    """n >= 10 nodes: node 0.417n slow, the link 0.12n -> 0.12n+1 slow, node 0.733n failing its own ECC check,
    the last node lost, node 9 on another NCCL."""
    slow, failing = int(n * 0.417), int(n * 0.733)
    link = (int(n * 0.12), int(n * 0.12) + 1)
    rng = random.Random(n)
    nodes = names(n)
    transfers = []
    for src in range(n):
        for offset in (-2, -1, 1, 2):
            dst = (src + offset) % n
            factor = (0.3 if slow in (src, dst) else 1.0) * (0.4 if (src, dst) == link else 1.0)
            gbps = GBPS * factor * rng.lognormvariate(0, 0.03)
            labels = {"src": nodes[src], "dst": nodes[dst], "stage": "first"}
            transfers.append(Metric("link_gbps", round(gbps, 4), "GB/s", labels=labels))
    reference = "upper quartile of the nodes' figures (9.9 GB/s) x 0.8, noise allowance 0.93"
    rows = [
        Row(Status.FAIL, f"{nodes[slow]} is slow both ways: 3.0 GB/s", node=nodes[slow], confirmed=True,
            metrics=[Metric("node_gbps", 3.0, "GB/s", expected=7.4, expected_source=reference)]),
        Row(Status.WARN, f"link {nodes[link[0]]} -> {nodes[link[1]]}: 4.0 GB/s", node=nodes[link[0]],
            peer=nodes[link[1]], confirmed=True,
            metrics=[Metric("link_gbps", 4.0, "GB/s", expected=7.4, expected_source=reference)]),
    ]  # fmt: skip
    links = Result(Status.FAIL, f"{nodes[slow]} slow; one slow link", rows=rows, metrics=transfers,
                   check_id="cluster.links", title="Links between nodes")  # fmt: skip
    skew = Result(Status.WARN, "NCCL 2.21.5 on 1 node, 2.27.7 on the others", check_id="cluster.skew",
                  rows=[Row(Status.WARN, "NCCL 2.21.5", node=nodes[9])], title="Same software")  # fmt: skip
    results = [Result(Status.PASS, f"{n} nodes joined", check_id="cluster.nodes", title="Nodes"), links, skew]
    members = [_node(k, name, failing) for k, name in enumerate(nodes)]
    members[n - 1]["lost"] = "no heartbeat for 60 s (killed?)"
    meta = {"host": nodes[0], "started_at": "2026-11-24T03:00:00+00:00", "duration_s": 41.2, "level": "standard",
            "source": "live"}  # fmt: skip
    return document.build_cluster(results, members, meta, strict=False, interrupted=False, launcher="torchrun")


def _node(rank: int, name: str, failing: int) -> dict[str, Any]:
    ecc = Status.FAIL if rank == failing else Status.PASS
    checks = [
        Result(Status.PASS, "driver 590.48.01, 8 GPUs", check_id="driver.nvml", title="NVML"),
        Result(ecc, "GPU 5: 3 uncorrected ECC errors" if ecc == Status.FAIL else "no ECC error",
               check_id="health.ecc", title="ECC",
               remediation=Remediation("Drain and replace the GPU.", ["nvidia-smi -i 5 -q -d ECC"])),
        Result(Status.PASS, HOSTILE_TEXT if rank == 5 else "site check fine", check_id="site.plugin", title="Site"),
    ]  # fmt: skip
    return {
        "name": name,
        "rank": rank,
        "status": ecc.value,
        "exit_code": 1 if ecc == Status.FAIL else 0,
        "checks": [c.to_dict() for c in checks],
    }
