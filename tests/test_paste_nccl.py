"""The NCCL-log reader over real NCCL_DEBUG=INFO/WARN pastes (tests/fixtures/pastes/nccl, sources in SOURCES.md):
every fact each log states, in the shapes the judges read, the signatures of data/signatures/nccl.toml the
engine finds in them, prefixes of every kind, and bad input."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from helpers.common import PASTES, gpudoctor, read_alone, read_amid
from helpers.growth import LINEAR, K, growth

from gpudoctor.api import Status
from gpudoctor.checks.system import judge_nccl_env
from gpudoctor.paste import nccl, read
from gpudoctor.paste.found import Found
from gpudoctor.paste.signatures import table
from gpudoctor.registry import discover

NCCL = PASTES / "nccl"
OTHER_KINDS = ("collect_env", "nvidia-smi", "errors", "kernel", "bug-report", "issues")


def found_in(text: str) -> Found:
    return read_alone(nccl.read, text)


def groups(signature: dict[str, Any]) -> dict[str, Any]:
    """What a signature's pattern captured (the engine also keeps the whole line under "_match")."""
    return {k: v for k, v in signature["values"].items() if not k.startswith("_")}


def fixture(name: str) -> Found:
    return found_in((NCCL / name).read_text(encoding="utf-8", errors="replace"))


def facts(
    section: dict[str, Any],
    nvml: dict[str, Any] | None = None,
    torch: str | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The whole snapshot a log gives: its nccl section, nvml's CUDA driver version, torch's NCCL, NCCL_* env."""
    return {
        "nvml": nvml or {},
        "torch": {"nccl": {"version": torch}} if torch else {},
        "system": {"env": env} if env else {},
        **({"nccl": section} if section else {}),
    }


IB3 = ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/RoCE"]
SHARP8 = [f"ibp{i}:1/IB/SHARP" for i in range(8)]


def warned(line: int, source: str, text: str, plugin: bool = False) -> dict[str, Any]:
    """A WARN of the network as the reader keeps it (nccl.net_warnings): its line, what printed it, a plugin or not."""
    return {"line": line, "source": source, "text": text, "plugin": plugin}


COMPLETION_12 = "NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode={} len=0 vendor err 129"
EXPECTED = {
    "info-2.12.12-ib-roce-nvmlwrap-warn.txt": facts(
        {
            "trees": True,
            "bootstrap": ["eno1np0"],
            "plugin": "internal",
            "channels": 2,
            "net": "IB",
            "version": "2.12.12",
            "cuda": "11.7",
            "warnings": ["nvmlDeviceGetHandleByPciBusId() failed: Not Found"],
            "interfaces": ["eno1np0"],
            "ib_devices": IB3,
        },
        torch="2.12.12",
    ),
    "info-2.16.2-rdma-sharp-plugin-roce-k8s.txt": facts(
        {
            "bootstrap": ["eth1"],
            "plugin": "NCCL RDMA Plugin",
            "version": "2.16.2",
            "cuda": "11.5",
            "net": "IBext",
            "interfaces": ["eth1"],
            "ib_devices": ["mlx5_4:1/RoCE"],
        },
        nvml={"cuda_driver_version": 11050},
        torch="2.16.2",
    ),
    # nccl-tests' own NCCL ("#  Rank 15 Group  0 Pid ..." header): not torch's
    "info-2.18.1-nccl-tests-8xa100-bootstrap-ib-ipoib.txt": facts(
        {
            "bootstrap": ["ibs85f0"],
            "plugin": "internal",
            "version": "2.18.1",
            "cuda": "12.1",
            "interfaces": ["ibs85f0"],
        },
        nvml={"cuda_driver_version": 12020},
    ),
    "info-2.18.5-roce-h800-two-nodes.txt": facts(
        {
            "bootstrap": ["enp24s0np0"],
            "plugin": "internal",
            "version": "2.18.5",
            "cuda": "12.0",
            "net": "IB",
            "interfaces": ["enp24s0np0"],
            "ib_devices": ["mlx5_4:1/RoCE"],
        },
        nvml={"cuda_driver_version": 12020},
        env={"NCCL_IB_HCA": "mlx5_4"},
    ),
    "info-2.19.3-single-rank-socket-gcp.txt": facts(
        {
            "bootstrap": ["ens7"],
            "no_rdma": ["no IB device"],
            "channels": 32,
            "version": "2.19.3",
            "cuda": "12.3",
            "net": "Socket",
            "interfaces": ["ens7"],
            "ranks": 1,
        },
        nvml={"cuda_driver_version": 12000},
        torch="2.19.3",
    ),
    "info-2.20.5-no-libibverbs-socket-fallback-l20.txt": facts(
        {
            "bootstrap": ["eth0"],
            "no_rdma": ["no libibverbs"],
            "plugin": "internal",
            "version": "2.20.5",
            "cuda": "12.4",
            "net": "Socket",
            "interfaces": ["eth0"],
        },
        nvml={"cuda_driver_version": 12060},
    ),
    "info-2.21.5-docker-4gpu-bootstrap.txt": facts(
        {"bootstrap": ["eth0"], "plugin": "internal", "version": "2.21.5", "cuda": "12.4", "interfaces": ["eth0"]},
        nvml={"cuda_driver_version": 12040},
        torch="2.21.5",
    ),
    "info-2.24.3-prefix-stripped-by-user-ib-sharp-nvls.txt": facts(
        {
            "bootstrap": ["eth0"],
            "plugin": "NCCL RDMA Plugin v8",
            "version": "2.24.3",
            "cuda": "12.2",
            "net": "IBext_v8",
            "nvls": True,
            "interfaces": ["eth0"],
            "ib_devices": SHARP8,
            "ranks": 8,
        },
        nvml={"cuda_driver_version": 12040},
        torch="2.24.3",
        env={"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_PCI_RELAXED_ORDERING": "1"},
    ),
    "info-2.4.8-nccl-tests-lo-socket-v100.txt": facts(
        {
            "bootstrap": ["lo"],
            "no_rdma": ["no IB device"],
            "plugin": "internal",
            "version": "2.4.8",
            "cuda": "10.1",
            "interfaces": ["lo"],
        }
    ),
    "info-2.7.8-ib-docker-bootstrap-old-format.txt": facts(
        {
            "bootstrap": ["ibs3"],
            "plugin": "internal",
            "net": "IB",
            "version": "2.7.8",
            "cuda": "11.1",
            "interfaces": ["ibs3"],
            "ib_devices": ["mlx5_0:1/IB"],
        },
        torch="2.7.8",
        env={"NCCL_IB_DISABLE": "0"},
    ),
    "info-channels-busid-form-p2p-ipc-read-net-ib-gdrdma-2-nodes.txt": facts(
        {"net_devices": [0], "gdrdma": "on", "net": "IB", "transports": ["NET/IB/GDRDMA", "P2P/IPC"]}
    ),
    "info-channels-p2p-ipc-net-ib-gdrdma-sglang.txt": facts(
        {"net_devices": [0, 2], "gdrdma": "on", "net": "IB", "transports": ["NET/IB/GDRDMA", "P2P/IPC"]}
    ),
    "info-nvls-not-available-coll-channels-megatron.txt": facts({"channels": 24, "nvls": False}),
    "info-sagemaker-cloudwatch-interleaved-timestamps.txt": facts({"nvls": False}),
    "net-ib-using-ib-and-roce-azure.txt": facts(
        {"interfaces": ["eth0"], "ib_devices": ["ibP111p0s0:1/IB", "rdmaP1111p0s2:1/RoCE"]}
    ),
    "warn-2.26.2-timestamped-nvls-cuda-failure-401-h100.txt": facts(
        {"warnings": ["Cuda failure 401 'the operation cannot be performed in the present state'"]}
    ),
    # TensorFlow's bundled NCCL: no CUDA version (macros unexpanded), not torch's
    "warn-2.8.3-tensorflow-ibv-create-qp-failed.txt": facts(
        {
            "net": "IBext",
            "version": "2.8.3",
            "warnings": ["Call to ibv_create_qp failed"],
            "net_warnings": [warned(4, "ibvwrap.c:130", "Call to ibv_create_qp failed", plugin=True)],
        }
    ),
    "warn-ib-plugin-completion-status-12-vendor-err-129.txt": facts(
        {
            "warnings": [
                COMPLETION_12.format(0) + " (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 "
                "remoteGidsfd00:1148:9000:5000:4:200:3:ff1f",
                COMPLETION_12.format(32616) + " (Recv) localGid fd00:1148:9000:5000:4:200:3:ff21 "
                "remoteGidsfd00:1148:9000:5000:4:200:3:ff20",
            ],
            "net_warnings": [
                warned(
                    1,
                    "ib_plugin.c:1615",
                    COMPLETION_12.format(0) + " (Recv) localGid fd00:1148:9000:5000:4:200:3:ff22 "
                    "remoteGidsfd00:1148:9000:5000:4:200:3:ff1f",
                    plugin=True,
                ),
                warned(
                    6,
                    "ib_plugin.c:1615",
                    COMPLETION_12.format(32616) + " (Recv) localGid fd00:1148:9000:5000:4:200:3:ff21 "
                    "remoteGidsfd00:1148:9000:5000:4:200:3:ff20",
                    plugin=True,
                ),
            ],
        }
    ),
    "warn-ibv-create-cq-cannot-allocate-memory-h200.txt": facts(
        {
            "warnings": [
                "Call to ibv_create_cq failed with error Cannot allocate memory",
                "[Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
                "[Proxy Service 10] Failed to execute operation Connect from rank 10, retcode 3",
            ],
            "net_warnings": [
                warned(1, "misc/ibvwrap.cc:190", "Call to ibv_create_cq failed with error Cannot allocate memory"),
                warned(
                    16,
                    "proxy.cc:1533",
                    "[Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
                ),
                warned(
                    18,
                    "proxy.cc:1567",
                    "[Proxy Service 10] Failed to execute operation Connect from rank 10, retcode 3",
                ),
            ],
        }
    ),
    "warn-net-ib-completion-error-12-azure.txt": facts(
        {
            "warnings": ["NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len"],
            "net_warnings": [
                warned(
                    1,
                    "transport/net_ib.cc:1296",
                    "NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len",
                )
            ],
        }
    ),
    "warn-net-ofi-unable-to-register-memory-pdsh-prefixed.txt": facts(
        {
            "warnings": [
                "NET/OFI Unable to register memory (type = 1) for device 0. RC: 12, Error: Cannot allocate memory"
            ],
            "net_warnings": [
                warned(
                    1,
                    "register_mr_buffers:465",
                    "NET/OFI Unable to register memory (type = 1) for device 0. RC: 12, Error: Cannot allocate memory",
                    plugin=True,
                )
            ],
        }
    ),
}

SIGNATURES = {
    "info-2.20.5-no-libibverbs-socket-fallback-l20.txt": ["nccl-libibverbs-missing"],
    "info-2.4.8-nccl-tests-lo-socket-v100.txt": ["nccl-socket-loopback"],
    "warn-2.26.2-timestamped-nvls-cuda-failure-401-h100.txt": ["nccl-nvls-cuda-failure"],
    "warn-2.8.3-tensorflow-ibv-create-qp-failed.txt": ["nccl-ibv-call-failed"],
    "warn-ib-plugin-completion-status-12-vendor-err-129.txt": ["nccl-ib-retry-exceeded"],
    "warn-ibv-create-cq-cannot-allocate-memory-h200.txt": ["nccl-ibv-cannot-allocate-memory"],
    "warn-net-ib-completion-error-12-azure.txt": ["nccl-ib-retry-exceeded"],
    "warn-net-ofi-unable-to-register-memory-pdsh-prefixed.txt": ["nccl-ofi-register-memory"],
}


def test_every_nccl_fixture_is_expected() -> None:
    assert sorted(p.name for p in NCCL.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_nccl_fixture_gives_exactly_what_it_states(name: str) -> None:
    found = fixture(name)
    assert found.facts == EXPECTED[name]
    assert not found.conflicts
    whole = read((NCCL / name).read_text(encoding="utf-8"))
    assert sorted({s["id"] for s in whole.signatures if s["id"].startswith("nccl-")}) == SIGNATURES.get(name, [])


def test_each_fact_says_the_line_it_came_from() -> None:
    found = fixture("info-2.24.3-prefix-stripped-by-user-ib-sharp-nvls.txt")
    assert found.origins["nccl.version"].line == 4 and found.origins["nccl.version"].reader == "NCCL log"
    assert found.origins["nvml.cuda_driver_version"].text == "cudaDriverVersion 12040"
    assert found.origins["nccl.ib_devices"].line == 14
    assert found.origins["nccl.ranks"].text.startswith("ncclCommInitRankConfig comm 0x596c4b4edb80 rank 0 nranks 8")


def test_signature_values_name_the_call_the_interface_and_the_status() -> None:
    signatures = read((NCCL / "info-2.4.8-nccl-tests-lo-socket-v100.txt").read_text()).signatures
    loopback = [groups(s) for s in signatures if s["id"] == "nccl-socket-loopback"]
    assert loopback[:2] == [
        {"what": "Bootstrap", "interface": "lo", "address": "127.0.0.1"},
        {"what": "NET/Socket", "interface": "lo", "address": "127.0.0.1"},
    ]
    signatures = read((NCCL / "warn-ib-plugin-completion-status-12-vendor-err-129.txt").read_text()).signatures
    assert groups(signatures[0]) == {"peer": "10.216.210.236<54862>", "vendor_err": "129"}
    signatures = read((NCCL / "warn-2.26.2-timestamped-nvls-cuda-failure-401-h100.txt").read_text()).signatures
    nvls = next(s for s in signatures if s["id"] == "nccl-nvls-cuda-failure")
    assert groups(nvls) == {"code": "401", "error": "the operation cannot be performed in the present state"}


# Lines quoted in NCCL's documentation and in public threads for the signatures no stored log holds.
QUOTED_LINES = {
    # docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/runtime_and_mpi_issues.html
    "nccl-shm-too-small": "host:123:456 [0] misc/shmutils.cc:60 NCCL WARN Error: failed to extend "
    "/dev/shm/nccl-03v824 to 4194660 bytes",
    "nccl-shm-removed-by-systemd": "host:123:456 [0] NCCL WARN unlink shared memory /dev/shm/nccl-d5rTd0 failed, "
    "error: No such file or directory",
    # marin-community/marin#6940
    "nccl-no-socket-interface": "host:1:1 [0] bootstrap.cc:120 NCCL WARN Bootstrap : no socket interface found",
    # NVIDIA/nccl#1837
    "nccl-socket-ifname-no-match": "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is "
    "neither AF_INET(2) nor AF_INET6(10)",
    # src/include/socket.h createListenSocket at v2.3.5-5 with strerror(EAFNOSUPPORT)
    "nccl-socket-no-address-family": "host:1:1 [0] include/socket.h:312 NCCL WARN Net : Socket creation failed : "
    "Address family not supported by protocol",
    # NVIDIA/nccl#1925
    "nccl-mnnvl-not-working": "[2025-11-30 05:55:16] nccl-sleep-c7d759db6-cgz82:3769901:3769901 [1] mnnvl.cc:67 NCCL "
    "WARN MNNVL (cliqueSize 8) is available but not working on this system. Check the IMEX channel configuration "
    "(/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
    # the CUDACHECK format of src/include/checks.h with cudaErrorMemoryAllocation's text
    "nccl-cuda-out-of-memory": "host:1:1 [3] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
    # v2.30.7-1 src/transport/net_ib/p2p.cc format with IBV_WC_LOC_PROT_ERR
    "nccl-ib-local-protection-error": "host:1:2 [0] transport/net_ib/p2p.cc:688 NCCL WARN NET/IB: Got completion "
    "from peer 10.0.0.2<43210> with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_RECV(128) vendor_err=81 hca mlx5_0",
    # src/init.cc initTransportsRank's WARN for two ranks on one GPU (NCCL_DEBUG=WARN prefix of src/debug.cc)
    "nccl-duplicate-gpu": "node1:1234:1300 [1] init.cc:871 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both "
    "on CUDA device 1000",
    # bootstrap.cc "Bootstrap : Using%s" with the docker bridge
    "nccl-socket-docker-bridge": "host:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>",
}


@pytest.mark.parametrize("sid", sorted(QUOTED_LINES))
def test_quoted_lines_meet_their_signature(sid: str) -> None:
    assert [s["id"] for s in read(QUOTED_LINES[sid]).signatures if s["id"].startswith("nccl-")] == [sid]


def test_two_ranks_on_one_gpu_is_the_programs_own_setting_as_torch_repeats_it() -> None:
    """torch's DistBackendError repeats NCCL's last error after 'Last error:'; the finding is the program's, never a
    failure of the machine."""
    text = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, "
        "invalid usage, NCCL version 2.14.3\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "Last error:\nDuplicate GPU detected : rank 0 and rank 4 both on CUDA device 7000\n"
    )
    sighted = [s for s in read(text).signatures if s["id"] == "nccl-duplicate-gpu"]
    assert sighted and sighted[0]["values"] == {"rank": "0", "other": "4", "bus": "7000"}
    assert table()["nccl-duplicate-gpu"].owner == "program.error"


def test_every_nccl_signature_is_well_formed_owned_by_a_check_and_met() -> None:
    checks = {spec.id for spec in discover(entry_points=False).specs}
    mine = {sid: sig for sid, sig in table().items() if sig.file == "nccl.toml"}
    met = {sid for ids in SIGNATURES.values() for sid in ids} | set(QUOTED_LINES)
    assert set(mine) == met
    for sid, sig in mine.items():
        assert sid.startswith("nccl-") and sig.owner in checks, sid
        assert sig.status in ("fail", "warn") and sig.cause and sig.source and sig.fix, sid
    retry = "NET/IB: Got completion from peer 10.0.0.5<1> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0)"
    assert [s["id"] for s in read(retry).signatures] == ["nccl-ib-retry-exceeded"]
    other_status = "NET/IB : Got completion from peer 10.0.0.5<1> with error 5, opcode 0, len 0, vendor err 249"
    assert [s["id"] for s in read(other_status).signatures if s["id"].startswith("nccl-")] == []


@pytest.mark.parametrize(
    ("via", "kind"),
    [
        ("NET/IB/0/GDRDMA", "NET/IB/GDRDMA"),
        ("NET/IB/3", "NET/IB"),
        ("NET/Socket/1", "NET/Socket"),
        ("NET/IB/2(5)/GDRDMA(PCI)/Shared", "NET/IB/GDRDMA"),
        ("NET/AWS Libfabric/3/GDRDMA", "NET/AWS Libfabric/GDRDMA"),
        ("NET/IBext_v8/0/GDRDMA", "NET/IBext_v8/GDRDMA"),
        ("COLLNET/SHARP/0/GDRDMA", "COLLNET/SHARP/GDRDMA"),
        ("P2P/IPC", "P2P/IPC"),
        ("P2P/IPC/read", "P2P/IPC"),
        ("P2P/CUMEM/read/CE", "P2P/CUMEM"),
        ("P2P/MNNVL", "P2P/MNNVL"),
        ("P2P/direct pointer/read", "P2P/direct pointer"),
        ("P2P/indirect/3[3]/read", "P2P/indirect"),
        ("SHM/direct/direct", "SHM"),
        ("SHM/direct", "SHM"),
        ("direct shared memory", "SHM"),
        ("something else", None),
        ("", None),
    ],
)
def test_transports_are_named_without_devices_and_modes(via: str, kind: str | None) -> None:
    """The channel formats of src/transport/{net,p2p,shm,coll_net}.cc across releases (nccl/FORMATS.md)."""
    assert nccl.transport(via) == kind


def test_channel_lines_of_every_era_give_their_transports() -> None:
    lines = [
        "node:1:2 [0] NCCL INFO Ring 00 : 0 -> 1 via NET/IB/0",  # 2.4 and before (horovod/horovod#1651)
        "spark01:2683:2826 [0] NCCL INFO Channel 00 : 1[3000] -> 0[3000] [receive] via NET/IB/0",  # 2.7
        "node:1:2 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[3d000] via direct shared memory",  # 2.7 shm.cc
        "node:1:2 [1] NCCL INFO Channel 01/0 : 9[1] -> 8[0] via P2P/CUMEM",  # 2.19+ (deepseek-ai/DeepEP#143)
        "node:1:2 [1] NCCL INFO Channel 02/0 : 1[1] -> 0[0] via SHM/direct/direct",  # 2.18
        "node:1:2 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA",  # coll_net.cc
    ]
    assert fixed(lines)["nccl"]["transports"] == ["COLLNET/SHARP/GDRDMA", "NET/IB", "P2P/CUMEM", "SHM"]


def fixed(lines: list[str]) -> dict[str, Any]:
    found = Found(lines)
    nccl.read(found)
    return found.facts


def test_prefixes_of_every_launcher_are_read_through() -> None:
    """NCCL's own prefix with a 2.26+ timestamp, pdsh's, torchrun's [rankN]:, markdown quotes, a CloudWatch
    timestamp line between them, and the prefix removed."""
    lines = [
        "> gcn6:1080060:1080060 [0] NCCL INFO cudaDriverVersion 12020",
        "10.0.87.143: 10.0.87.143: ip-10-0-87-143:149:149 [5] NCCL INFO Using network IB",
        "[rank3]: node:1:2 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB bond0:10.0.0.3<0>",
        "2024-12-04T05:27:44.078Z",
        "algo-1:18062:18131 [5] NCCL INFO NVLS multicast support is available on dev 5",
        "[2025-07-21 19:05:29] node004:27907:27907 [1] transport/nvls.cc:254 NCCL WARN Cuda failure 1 "
        "'invalid argument'",
        "  NCCL version 2.27.7+cuda12.9",
        "[0] NCCL INFO comm 0x5574 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - Init START",
        "NCCL_P2P_DISABLE set by environment to 1",
    ]
    assert fixed(lines) == {
        "nvml": {"cuda_driver_version": 12020},
        "torch": {"nccl": {"version": "2.27.7"}},
        "system": {"env": {"NCCL_P2P_DISABLE": "1"}},
        "nccl": {
            "net": "IB",
            "nvls": True,
            "warnings": ["Cuda failure 1 'invalid argument'"],
            "version": "2.27.7",
            "cuda": "12.9",
            "interfaces": ["bond0"],
            "ib_devices": ["mlx5_0:1/IB"],
            "ranks": 16,
        },
    }


def test_the_environment_nccl_printed_feeds_the_nccl_env_judge() -> None:
    facts = fixed(["node:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1."])
    assert facts["system"]["env"] == {"NCCL_P2P_DISABLE": "1"}
    result = judge_nccl_env(facts["system"])
    assert result.status is Status.WARN and result.summary.startswith("NCCL_P2P_DISABLE=1")


def test_nodes_that_disagree_are_conflicts_and_communicators_give_the_largest() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO cudaDriverVersion 12020",
        "b:1:1 [0] NCCL INFO cudaDriverVersion 12040",
        "a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init COMPLETE",
        "a:1:1 [0] NCCL INFO comm 0x2 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
    ]
    found = Found(lines)
    nccl.read(found)
    assert found.facts["nvml"]["cuda_driver_version"] == 12020
    assert [value for value, _ in found.conflicts["nvml.cuda_driver_version"]] == [12020, 12040]
    assert found.facts["nccl"]["ranks"] == 16 and found.origins["nccl.ranks"].line == 3


def test_warnings_are_kept_once_each_and_a_flood_is_capped() -> None:
    same = ["h:1:1 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer h<1>"] * 500
    assert fixed(same)["nccl"]["warnings"] == ["socketProgress: Connection closed by remote peer h<1>"]
    distinct = [f"h:1:1 [0] proxy.cc:1 NCCL WARN [Proxy Service {i}] Failed to execute operation" for i in range(500)]
    warnings = fixed(distinct)["nccl"]["warnings"]
    assert len(warnings) == nccl.MAX_WARNINGS and warnings[0] == "[Proxy Service 0] Failed to execute operation"


NVLS_LINE = "algo-1:18062:18131 [5] NCCL INFO NVLS multicast support is not available on dev 5"
ONLY_NVLS = {"nvml": {}, "torch": {}, "system": {}, "nccl": {"nvls": False}}


def with_nvls_line(text: str) -> Found:
    return read_amid(text, NVLS_LINE, nccl.read)


@pytest.mark.parametrize("kind", OTHER_KINDS)
def test_other_kinds_of_paste_give_the_nccl_reader_nothing_of_their_own(kind: str) -> None:
    """torch's errors quote "NCCL version 2.7.8" and "NCCL_DEBUG=INFO": those are not NCCL's log."""
    for path in sorted((PASTES / kind).glob("*.txt")):
        found = with_nvls_line(path.read_text(encoding="utf-8", errors="replace"))
        assert found.facts == ONLY_NVLS, path.name
        assert found.kinds == {nccl.READER: 1}, path.name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "NCCL",
        "NCCL version 2.",
        "NCCL version 2.18.1",
        "x:1:1 [0] NCCL INFO cudaDriverVersion ",
        "x:1:1 [0] NCCL INFO cudaDriverVersion twelve",
        "x:1:1 [0] NCCL INFO NET/IB : Using",
        "x:1:1 [0] NCCL INFO NET/Socket : Using",
        "x:1:1 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0",
        "x:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via",
        "x:1:1 [0] NCCL INFO Using network",
        "x:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment",
        "x:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks",
        "x:1:1 [0] NCCL INFO ",
        "x:1:1 [0] misc/socket.cc:1 NCCL WARN ",
        "Channel 00 is a TV channel",
        "Bootstrap the project with cookiecutter",
        "Using network drives is slow",
        "NCCL_DEBUG=INFO torchrun --nproc_per_node 8 train.py",
    ],
)
def test_truncated_and_lookalike_lines_give_nothing(text: str) -> None:
    assert with_nvls_line(text).facts == ONLY_NVLS


def test_binary_junk_is_read_without_error_and_gives_nothing_of_its_own() -> None:
    rng = random.Random(29)
    junk = bytes(rng.randrange(256) for _ in range(200_000)).decode("latin-1")
    assert with_nvls_line(junk).facts == ONLY_NVLS


def test_a_20_mb_log_is_read_whole_and_in_linear_time() -> None:
    """Every stored NCCL log and kernel log repeated to 20 MB, about 330,000 lines, most of them NCCL's; K times
    the log is about K times the work (tests/helpers/growth.py, from 0.5 to 4 MB)."""
    paths = [*sorted(NCCL.glob("*.txt")), *sorted((PASTES / "kernel").glob("*.txt"))]
    chunk = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in paths)

    def log(size: int) -> str:
        return (chunk + "\n") * (size // len(chunk) + 1)

    grew = growth(lambda text: nccl.read(Found.of(text)), log(4_000_000 // K), log(4_000_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the log"
    found = Found.of(log(20_000_000))
    nccl.read(found)
    assert found.facts["nccl"]["transports"] == ["NET/IB/GDRDMA", "P2P/IPC"]
    assert len(found.facts["nccl"]["warnings"]) == 10
    assert "nccl.version" in found.conflicts  # every release of the fixtures, the first is the fact


def test_torchs_unhandled_system_error_alone_offers_the_container_cures_of_ncclsystemerror() -> None:
    """Without NCCL's WARN lines the failed call is unknown: the cure names NCCL's usual ones in a container, /dev/shm
    (--ipc=host, --shm-size) and an isolated network between nodes (host networking)."""
    paste = PASTES / "errors" / "nccl-error-2-unhandled-system-error-torch-2.4-rank-prefixed.txt"
    document = json.loads(gpudoctor("check", "--from", str(paste), "--json").stdout)
    nccl_check = next(c for c in document["checks"] if c["check_id"] == "torch.nccl")
    fix = nccl_check["remediation"] or {}
    said = " ".join([*fix.get("commands", []), *((fix.get("instead") or {}).get("commands", []))])
    assert nccl_check["status"] == "fail"
    assert "--ipc=host" in said and "--shm-size" in said
    assert "--network=host" in said and "hostNetwork" in said
