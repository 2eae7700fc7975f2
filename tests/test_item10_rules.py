"""Rules that were missing (each with its source in docs/DIAGNOSES.md): an NCCL older than a GPU's
architecture; NCCL's own interface choice on a multi-node job where other nodes cannot reach it; GeForce boards
whose driver reports peer-to-peer that GeForce does not support."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.checks import p2p, system, torch_build
from gpudoctor.facts import system as system_facts

NCCL = {"distributed": True, "nccl_backend": True, "gloo_backend": True}


def gpu(index: int, name: str, capability: list[int]) -> dict:
    return {"index": index, "name": name, "compute_capability": capability, "uuid": f"GPU-{index}"}


def test_an_nccl_older_than_the_gpu_architecture_fails_naming_the_release_it_needs() -> None:
    torch = {"version": "2.6.0+cu124", "cuda": "12.4", "nccl": {**NCCL, "version": "2.21.5"}}
    result = torch_build.judge_nccl(torch, [gpu(0, "NVIDIA GeForce RTX 5090", [12, 0])])
    assert result.status.value == "fail"
    assert "NCCL 2.21.5 predates Blackwell (RTX 50 / RTX PRO) (sm_120): it needs NCCL >= 2.25.1" in result.summary
    assert result.remediation.commands[0].startswith("pip install torch==2.15.0+cu132 ")
    b300 = torch_build.judge_nccl({**torch, "nccl": {**NCCL, "version": "2.26.2"}}, [gpu(0, "NVIDIA B300", [10, 3])])
    assert b300.status.value == "pass"  # sm_103 runs NCCL's sm_100 cubins (same major)
    hopper = torch_build.judge_nccl({**torch, "nccl": {**NCCL, "version": "2.14.3"}}, [gpu(0, "NVIDIA H100", [9, 0])])
    assert hopper.status.value == "fail" and "NCCL >= 2.15.1" in hopper.summary


def address(name: str, ip: str, virtual: bool = False, up: bool = True) -> dict:
    return {"name": name, "family": 6 if ":" in ip else 4, "address": ip, "up": up, "virtual": virtual}


MULTI = {"SLURM_NNODES": "2"}


def nccl_env(addresses: list[dict], env: dict | None = None, **flags: bool):
    return system.judge_nccl_env(
        {
            "env": MULTI if env is None else env,
            "interfaces": sorted({a["name"] for a in addresses}),
            "interface_addresses": addresses,
        },
        **flags,
    )


def test_nccl_choosing_a_bridge_on_a_multi_node_job_warns_naming_the_interface_to_use() -> None:
    """NCCL excludes only docker*, lo* and virbr* (socket.cc): a veth or br-* listed before the NIC wins."""
    addresses = [address("lo", "127.0.0.1", True), address("veth1a2b", "172.18.0.1", True), address("ens5", "10.0.0.7")]
    result = nccl_env(addresses)
    assert result.status.value == "warn"
    assert (
        "NCCL would bootstrap over veth1a2b (172.18.0.1)" in result.summary and "ens5 (10.0.0.7) can" in result.summary
    )
    assert result.remediation.commands[0] == "export NCCL_SOCKET_IFNAME=ens5"
    assert nccl_env(addresses, {}).status.value == "pass"  # one node: NCCL's choice stays on this host
    assert nccl_env(addresses, {**MULTI, "NCCL_SOCKET_IFNAME": "ens5"}).status.value == "pass"
    torchrun = {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}
    assert nccl_env(addresses, torchrun).status.value == "warn"
    assert nccl_env(addresses, {}, spans_nodes=True).status.value == "warn"


def test_nccl_prefers_infiniband_and_skips_docker_so_those_are_fine() -> None:
    ib_first = [address("eth9", "fe80::1"), address("ib0", "192.168.10.4")]
    assert nccl_env(ib_first).status.value == "pass"
    docker = [address("docker0", "172.17.0.1", True), address("eno1", "10.1.2.3")]
    assert nccl_env(docker).status.value == "pass"


def test_a_node_with_only_virtual_interfaces_cannot_join_a_multi_node_job() -> None:
    result = nccl_env([address("lo", "127.0.0.1", True), address("docker0", "172.17.0.1", True)])
    assert result.status.value == "fail" and "NCCL would use docker0 (172.17.0.1)" in result.summary
    link_local = nccl_env([address("lo", "127.0.0.1", True), address("eth0", "fe80::2")])
    assert link_local.status.value == "fail"


def test_interface_addresses_are_gathered_in_the_kernel_order_with_their_kind() -> None:
    found = system_facts._interface_addresses(Path("/"))
    lo = next(a for a in found if a["name"] == "lo" and a["family"] == 4)
    assert lo == {"name": "lo", "family": 4, "address": "127.0.0.1", "up": True, "virtual": True}
    assert found[0]["name"] == "lo"  # getifaddrs lists lo (index 1) first


def topology(status: int) -> dict:
    return {"indexes": [0, 1], "p2p_read": [[None, status], [status, None]]}


def test_geforce_boards_whose_driver_reports_p2p_warn_with_nccl_p2p_disable() -> None:
    boards = [gpu(0, "NVIDIA GeForce RTX 4090", [8, 9]), gpu(1, "NVIDIA GeForce RTX 4090", [8, 9])]
    result = p2p.judge_consumer_p2p(boards, topology(0), {})
    assert result.status.value == "warn" and "which GeForce does not support" in result.summary
    assert result.remediation.commands[0] == "export NCCL_P2P_DISABLE=1"
    assert p2p.judge_consumer_p2p(boards, topology(0), {"NCCL_P2P_DISABLE": "1"}).status.value == "pass"
    assert p2p.judge_consumer_p2p(boards, topology(4), {}).status.value == "pass"  # NVML: not supported
    pro = [gpu(0, "NVIDIA RTX 6000 Ada Generation", [8, 9]), gpu(1, "NVIDIA RTX 6000 Ada Generation", [8, 9])]
    assert p2p.judge_consumer_p2p(pro, topology(0), {}).status.value == "skip"
    env = {"env": {"NCCL_P2P_DISABLE": "1"}, "interfaces": []}
    assert system.judge_nccl_env(env, geforce_pairs=True).status.value == "pass"  # the fix, not a hazard
    assert system.judge_nccl_env(env).status.value == "warn"


def test_a_missing_driver_is_installed_with_the_distributions_package_for_the_torch_here() -> None:
    """Once a fixed "nvidia-driver-580-server # or your distribution's driver package" on every node."""
    from gpudoctor.checks import driver

    nvml = {"status": "library-not-found"}
    noble = {"os": "Linux", "machine": "x86_64", "os_release": {"id": "ubuntu", "version_codename": "noble"}}
    torch = {"version": "2.14.0+cu126", "cuda": "12.6"}
    result = driver.judge_nvml(nvml, noble, torch)
    assert result.remediation.commands[1] == "sudo apt install nvidia-driver-565-server"
    assert "torch 2.14.0+cu126 needs driver >= 560.35.05" in result.remediation.why
    rocky = {"os": "Linux", "machine": "x86_64", "os_release": {"id": "rocky", "version_id": "9.4"}}
    assert driver.judge_nvml(nvml, rocky).remediation.commands[1:3] == [
        "sudo dnf module enable -y nvidia-driver:595-open",
        "sudo dnf install -y nvidia-open",
    ]  # no torch here: the default build, torch 2.15.0+cu132, needs 595.71.05
    assert "<INSTALL>" not in " ".join(driver.judge_nvml(nvml).remediation.commands)
