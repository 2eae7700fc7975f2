"""The network between nodes (issue 50): NCCL's log read by one reader whether pasted or captured by cluster mode
(real logs of every fabric in tests/fixtures/pastes/fabrics and nccl, sources in their SOURCES files), the figure
each fabric should give, the causes with their cures leading the report; and cluster mode on namespace hosts with
two NICs each and a Docker-like bridge, where the slow link, the down interface and the bridge are named as causes
with the setting that fixes each, and the transport measured is said."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.common import LEAN_CLUSTER, PASTES, ROOT, gpudoctor, read_alone
from helpers.netns import HostsUnavailable, TwoNicHosts

from gpudoctor.checks import benchmarks
from gpudoctor.checks.network import judge_interfaces, judge_nccl
from gpudoctor.diagnosis import Evidence, diagnose
from gpudoctor.judging import network, sockets
from gpudoctor.model import Result, Row, Status
from gpudoctor.paste import nccl, read, to_snapshot

FABRICS = PASTES / "fabrics"


def snapshot(*paths: Path) -> dict[str, Any]:
    """What `check --from` judges: every reader over the files pasted one after another."""
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in paths)
    return to_snapshot("paste.txt", read(text))


def nccl_facts(name: str) -> dict[str, Any]:
    return read_alone(nccl.read, (FABRICS / name).read_text(encoding="utf-8")).facts.get("nccl", {})


# --- one reader: every fabric's log, every release's format ------------------------------------------------------

READ = {
    # NCCL 2.2x + aws-ofi-nccl on p5en (8x H200): EFA through libfabric, 16 NICs (NVIDIA/nccl issue 1597)
    "efa-libfabric-16-nics-p5en-8xh200-partial.txt": {"net": "Libfabric", "ofi_provider": "efa", "ofi_nics": 16},
    # HPE Slingshot on Alps (GH200): aws-ofi-nccl over CXI, and the plugin missing (eth-cscs/cscs-docs PR 75)
    "cxi-alps-using-network-aws-libfabric.txt": {"net": "AWS Libfabric"},
    "cxi-alps-warn-network-aws-libfabric-not-found.txt": {
        "warnings": ["Error: network AWS Libfabric not found."],
        "net_warnings": [
            {"line": 1, "source": "net.cc:626", "text": "Error: network AWS Libfabric not found.", "plugin": False}
        ],
        "no_rdma": ["network not found"],
    },
    # libfabric's own warning in a CloudWatch export, NCCL 2.21.5 (aws/aws-ofi-nccl issue 889)
    "efa-2.21.5-provider-efa-empty-list-cloudwatch-partial.txt": {
        "version": "2.21.5",
        "cuda": "12.8",
        "interfaces": ["eth0"],
        "bootstrap": ["eth0"],
        "no_rdma": ["no OFI provider"],
    },
    # GPUDirect RDMA off per HCA (no peer memory), and for a GPU too far from its HCA (issues 1537, 1676, 1151)
    "ib-2.2x-roce-gdr-disabled-for-hca-peermem-loaded-partial.txt": {
        "net": "IB",
        "gdr_disabled": [{"hca": "mlx5_0"}, {"hca": "mlx5_1"}],
        "interfaces": ["primaryip"],
        "ib_devices": ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"],
        "ranks": 16,
    },
    "ib-gdr-disabled-dgx-os-25.01-nvidia-peermem-nccl-2.22-partial.txt": {
        "gdr_disabled": [{"hca": "mlx5_0"}, {"hca": "mlx5_1"}, {"hca": "mlx5_2"}],
    },
    "gdr-disabled-for-gpu-distance-7-gt-4-one-line.txt": {
        "gdr_disabled": [{"gpu": "ca000", "hca": "0", "distance": 7, "limit": 4}],
    },
    # NCCL 2.5.7: "Ring NN : a[busId] -> b[busId] [receive] via NET/IB/0", a bridge as bootstrap (issue 392)
    "ib-2.5.7-br0-bootstrap-roce-ring-net-ib-without-gdrdma-partial.txt": {
        "version": "2.5.7",
        "cuda": "10.0",
        "trees": True,
        "interfaces": ["br0"],
        "bootstrap": ["br0"],
        "ib_devices": ["mlx5_0:1/RoCE"],
        "transports": ["NET/IB", "P2P/IPC", "SHM"],
        "net_devices": [0],
        "gdrdma": "off",
        "net": "IB",
        "plugin": "internal",
        "channels": 2,
    },
    # 2.19+ "nRanks 16 nNodes 2 localRanks 8", rings over 8 channels, trees (issue 1412)
    "ib-nnodes-2-localranks-8-channels-trees-partial.txt": {"trees": True, "channels": 8, "nodes": 2, "local_ranks": 8},
    "socket-docker-enp67s0-no-ib-device-partial.txt": {
        "net": "Socket",
        "interfaces": ["enp67s0"],
        "bootstrap": ["enp67s0"],
        "no_rdma": ["no IB device"],
        "plugin": "internal",
    },
    "socket-ib-disabled-ifname-lo-bgp-unnumbered-partial.txt": {"net": "Socket", "interfaces": ["lo"]},
    # NCCL 2.30.7's own library on this CPU machine: its bootstrap line ("Bootstrap: Using", 2.24+), then CUDA stops it
    "made-here-2.30.7-cpu-bootstrap-cuda-driver-insufficient.txt": {
        "warnings": ["Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'"],
        "interfaces": ["eth0"],
        "bootstrap": ["eth0"],
    },
    "efa-ofi-fi-getinfo-failed-container-without-dev-infiniband-p5.txt": {
        "warnings": ["NET/OFI OFI fi_getinfo() call failed: No data available"],
        "net_warnings": [
            {
                "line": 1,
                "source": "nccl_net_ofi_rdma_init:7978",
                "text": "NET/OFI OFI fi_getinfo() call failed: No data available",
                "plugin": True,
            }
        ],
        "no_rdma": ["no OFI provider"],
    },
    # Slingshot on Perlmutter: aws-ofi-nccl 1.19.0 selects CXI (4 NICs), no "Using network" line kept, the 2.23+
    # ring line "GDR 1" (dingp/communication-libraries-image, benchmarks/reports, NCCL 2.29.2)
    "cxi-perlmutter-aws-ofi-1.19.0-provider-cxi-4-nics-ring-gdr-1.txt": {
        "ofi_provider": "cxi",
        "ofi_nics": 4,
        "gdrdma": "on",
        "net": "OFI",
        "plugin": "aws-ofi-nccl 1.19.0",
    },
    # GCP A3: Google's GPUDirect-TCPX plugin's own WARN lines, its function where NCCL's file would be, over NICs
    # 0 and 1 (NVIDIA/nccl issue 1652)
    "tcpx-a3-gpudirecttcpx-rx-ctrl-timeout-warn-two-nics.txt": {
        "warnings": [
            "0xadca8062b70:0xadca805d0f0, nic 0, enp12s0, 172.16.0.11<39187><-172.16.0.95<46723> rx rx ctrl timeout "
            "cnt 7331502, nanos 10000000585",
            "0x13b9b0082580:0x13b9b007cb00, nic 1, enp134s0, 172.16.0.49<45259><-172.16.0.48<52929> rx rx ctrl "
            "timeout cnt 7359786, nanos 10000015864",
        ],
        "net_warnings": [
            {
                "line": 1,
                "source": "tcpxResult_t tcpxCommProgress(tcpxComm*):1231",
                "text": "0xadca8062b70:0xadca805d0f0, nic 0, enp12s0, 172.16.0.11<39187><-172.16.0.95<46723> rx rx "
                "ctrl timeout cnt 7331502, nanos 10000000585",
                "plugin": True,
            },
            {
                "line": 3,
                "source": "tcpxResult_t tcpxCommProgress(tcpxComm*):1231",
                "text": "0x13b9b0082580:0x13b9b007cb00, nic 1, enp134s0, 172.16.0.49<45259><-172.16.0.48<52929> rx "
                "rx ctrl timeout cnt 7359786, nanos 10000015864",
                "plugin": True,
            },
        ],
        "net_devices": [0, 1],
        "net": "GPUDirectTCPX",
        "plugin": "GPUDirectTCPX",
    },
    # GCP A3 High (2 x a3-highgpu-8g, 16 H100): the plugin's own INFO lines, then "Using network GPUDirectTCPX_v7"
    # (elideng-sg/hypercomputer-internode-deepdive, assets/lab-18)
    "tcpx-a3-highgpu-using-network-gpudirecttcpx-v7-plugin-init-partial.txt": {
        "net": "GPUDirectTCPX_v7",
        "plugin": "GPUDirectTCPX",
    },
    # GCP A3 Mega: GPUDirect-TCPXO's "Using network FasTrak" on 16 ranks and its banner (the same repository, lab-22)
    "tcpxo-a3-mega-using-network-fastrak-16-ranks-init-1.0.17-partial.txt": {
        "net": "FasTrak",
        "plugin": "FasTrak 1.0.17",
    },
}


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "cxi-perlmutter-aws-ofi-1.19.0-provider-cxi-4-nics-ring-gdr-1.txt",
            "NET/OFI (HPE Slingshot (CXI)), 4 NICs, GPUDirect RDMA on",
        ),
        ("cxi-alps-using-network-aws-libfabric.txt", "NET/AWS Libfabric (libfabric)"),
        ("tcpx-a3-gpudirecttcpx-rx-ctrl-timeout-warn-two-nics.txt", "NET/GPUDirectTCPX (GPUDirect-TCPX), 2 NICs"),
        (
            "tcpx-a3-highgpu-using-network-gpudirecttcpx-v7-plugin-init-partial.txt",
            "NET/GPUDirectTCPX_v7 (GPUDirect-TCPX)",
        ),
        ("tcpxo-a3-mega-using-network-fastrak-16-ranks-init-1.0.17-partial.txt", "NET/FasTrak (GPUDirect-TCPXO)"),
        ("efa-libfabric-16-nics-p5en-8xh200-partial.txt", "NET/Libfabric (AWS EFA), 16 NICs"),
        (
            "ib-2.5.7-br0-bootstrap-roce-ring-net-ib-without-gdrdma-partial.txt",
            "NET/IB (RoCE), 1 NIC, GPUDirect RDMA off",
        ),
        ("socket-docker-enp67s0-no-ib-device-partial.txt", "NET/Socket (TCP sockets)"),
    ],
)
def test_a_pasted_log_names_its_transport_nics_and_gpudirect_rdma(name: str, said: str) -> None:
    assert network.choice(nccl_facts(name)).said() == said


@pytest.mark.parametrize(
    ("line", "gdr"),
    [("Connected all rings, use ring PXN 0 GDR 1", "on"), ("Connected all rings, use ring PXN 1 GDR 0", "off")],
)
def test_the_ring_line_says_gpudirect_rdma_where_no_channel_line_does(line: str, gdr: str) -> None:
    log = f"h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO {line}\n"
    assert read_alone(nccl.read, log).facts["nccl"]["gdrdma"] == gdr
    one_node = f"h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n{log}"
    assert "gdrdma" not in read_alone(nccl.read, one_node).facts["nccl"]  # no traffic between nodes to carry


def test_an_ofi_provider_asked_for_but_not_selected_names_no_network() -> None:
    log = (
        "h:1:2 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0\n"
        "h:1:2 [0] NCCL INFO NET/OFI Setting provider_filter to efa\n"
    )
    assert "net" not in read_alone(nccl.read, log).facts["nccl"]


def test_every_fabric_fixture_is_read() -> None:
    assert sorted(p.name for p in FABRICS.glob("*.txt")) == sorted(READ)


@pytest.mark.parametrize("name", sorted(READ))
def test_each_fabric_log_gives_what_it_states(name: str) -> None:
    assert nccl_facts(name) == READ[name]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("x:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 9[1] [send] via NET/IB/3/GDRDMA", ([3], "on")),
        ("x:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 9[1] [send] via NET/IB/3(9)/GDRDMA", ([3], "on")),
        ("x:1:2 [0] NCCL INFO Channel 01/0 : 9[1] -> 1[1] [receive] via NET/IB/1", ([1], "off")),
        ("x:1:2 [7] NCCL INFO Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0", ([0], "off")),
        ("x:1:2 [0] NCCL INFO Channel 00 : 15 -> 0 [send] via NET/Socket/0", ([0], None)),
    ],
)
def test_channels_between_nodes_give_the_nic_and_gpudirect_rdma(line: str, said: tuple[list[int], str | None]) -> None:
    """Every era's channel line (FORMATS.md): the NIC index and /GDRDMA; sockets never do GPUDirect RDMA."""
    facts = read_alone(nccl.read, line).facts["nccl"]
    assert (facts["net_devices"], facts.get("gdrdma")) == said


def test_gpudirect_rdma_on_some_channels_is_partial_and_counts_channels() -> None:
    lines = [
        "h:1:2 [0] NCCL INFO Channel 00/32 :    0   1   2   3",
        "h:1:2 [0] NCCL INFO 32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels",
        "h:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 9[1] [send] via NET/IB/0/GDRDMA",
        "h:1:2 [0] NCCL INFO Channel 01/0 : 9[1] -> 1[1] [receive] via NET/IB/1",
    ]
    facts = read_alone(nccl.read, "\n".join(lines)).facts["nccl"]
    assert facts["gdrdma"] == "partial" and facts["net_devices"] == [0, 1] and facts["channels"] == 32
    assert "nccl.channels" not in read_alone(nccl.read, "\n".join(lines)).conflicts


def test_a_plugin_loaded_after_a_name_not_found_is_the_plugin() -> None:
    lines = [
        "h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net-none.so. Using internal network plugin.",
        "h:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v9)",
        "h:1:1 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.14.0",
    ]
    found = read_alone(nccl.read, "\n".join(lines))
    assert found.facts["nccl"]["plugin"] == "aws-ofi-nccl 1.14.0" and not found.conflicts


def test_the_log_cluster_mode_captures_is_read_by_the_same_reader(tmp_path: Path) -> None:
    """A rank's NCCL_DEBUG_FILE (checks/ranks/links.read_log): the reader's facts, the settings NCCL printed."""
    from gpudoctor.checks.ranks.links import read_log

    log = tmp_path / "nccl.1234.log"
    text = (PASTES / "nccl" / "info-2.18.5-roce-h800-two-nodes.txt").read_text()
    log.write_text(text)
    said = read_log(tmp_path)
    assert said["net"] == "IB" and said["ib_devices"] == ["mlx5_4:1/RoCE"] and said["bootstrap"] == ["enp24s0np0"]
    assert said["settings"]["NCCL_IB_HCA"] == "mlx5_4"
    assert not tmp_path.exists(), "the rank's log folder is removed once read"
    assert network.choice(said).said().startswith("NET/IB (RoCE), 1 NIC")


# --- what the fabric should give, and the causes -----------------------------------------------------------------

IBSTAT = PASTES / "ibstat" / "ibstat-8x-cx7-ndr-400-ib-plus-4-cx6dx-eth-2-down-hgx-8gpu.txt"


def test_an_ib_log_with_the_nodes_ibstat_is_judged_against_its_own_nics() -> None:
    """NCCL over IBext (8 NICs, SHARP) beside ibstat's 8 active 400 Gb/s NDR ports: 8 x 48.5 GB/s, passing."""
    facts = snapshot(PASTES / "nccl" / "info-2.24.3-prefix-stripped-by-user-ib-sharp-nvls.txt", IBSTAT)
    result = judge_nccl(facts)
    assert result.status == Status.PASS, result.summary
    assert "NCCL chose NET/IBext_v8 (InfiniBand), 8 NICs" in result.summary
    (chosen, best) = result.metrics
    assert chosen.value == best.value == pytest.approx(8 * 48.5)
    assert (
        "8 x InfiniBand NICs, 3200 Gb/s" in chosen.reference_source
        and "nccl-tests/issues/267" in chosen.reference_source
    )


IPOIB = PASTES / "network" / "info-ib-disable-set-by-environment-using-network-socket-over-ipoib-mpi-help-partial.txt"
CAUSES = {
    "cxi-alps-warn-network-aws-libfabric-not-found.txt": "nccl-net-setting",
    "efa-ofi-fi-getinfo-failed-container-without-dev-infiniband-p5.txt": "nccl-ofi-no-provider",
    "efa-2.21.5-provider-efa-empty-list-cloudwatch-partial.txt": "nccl-ofi-no-provider",
    "ib-gdr-disabled-dgx-os-25.01-nvidia-peermem-nccl-2.22-partial.txt": "nccl-gdr-off",
    "ib-2.2x-roce-gdr-disabled-for-hca-peermem-loaded-partial.txt": "nccl-gdr-off",
    "gdr-disabled-for-gpu-distance-7-gt-4-one-line.txt": "nic-far-from-gpu",
    "ib-2.5.7-br0-bootstrap-roce-ring-net-ib-without-gdrdma-partial.txt": "nccl-gdr-off",
    # NCCL_IB_DISABLE=1 with sockets over the IPoIB interface ib0: the node has InfiniBand (nccl-tests issue 188)
    IPOIB.name: "nccl-ib-disabled",
}


def test_one_node_without_libibverbs_is_no_network_cause() -> None:
    """A one-node hang whose log also says libibverbs is missing (NVIDIA/nccl issue 257, fixed by intel_iommu=off):
    NCCL needs no network there, so the missing library leads nothing; nor does NCCL_IB_DISABLE on one node."""
    facts = snapshot(ROOT / "tests/fixtures/corpus/nccl-allreduce-hangs-1080ti-intel-iommu/paste.txt")
    assert "no libibverbs" in facts["nccl"]["no_rdma"] and network.causes(facts) == []
    assert network.causes(snapshot(FABRICS / "socket-ib-disabled-ifname-lo-bgp-unnumbered-partial.txt")) == []


@pytest.mark.parametrize("name", sorted(CAUSES))
def test_each_real_fault_leads_with_its_cause_and_cure(name: str) -> None:
    """The cause of each real log, leading the diagnosis with the command that shows it and the setting or command
    that cures it; network.nccl's finding folded beneath it."""
    facts = snapshot(FABRICS / name if (FABRICS / name).exists() else IPOIB)
    result = judge_nccl(facts)
    result.check_id = "network.nccl"
    causes = diagnose(Evidence([result], facts, live=False))
    assert causes[0].id == CAUSES[name] and causes[0].remediation.commands, causes
    assert result.explained_by == CAUSES[name] and result.remediation is None
    assert causes[0].source and causes[0].evidence


def test_gpudirect_rdma_off_with_the_module_loaded_points_at_nccl_itself() -> None:
    """DGX OS 25.01 (issue 1676): nvidia_peermem loaded, NCCL <= 2.22.3 still finds no peer memory: upgrade NCCL."""
    facts = snapshot(FABRICS / "ib-gdr-disabled-dgx-os-25.01-nvidia-peermem-nccl-2.22-partial.txt")
    facts["system"]["kernel_modules"] = ["nvidia", "nvidia_peermem"]
    (cause,) = network.causes(facts)
    assert "nv_peer_mem" in cause.remediation.why and any("nvidia-nccl" in c for c in cause.remediation.commands)
    facts["system"]["kernel_modules"] = ["nvidia"]
    assert "sudo modprobe nvidia-peermem" in network.causes(facts)[0].remediation.commands[1]


def test_sockets_where_the_node_has_rdma_ports_fail_and_say_both_figures() -> None:
    """A socket log (NCCL_IB_DISABLE=1) beside ibstat's ports: a failure, the RDMA figure the run should reach."""
    facts = snapshot(FABRICS / "socket-ib-disabled-ifname-lo-bgp-unnumbered-partial.txt", IBSTAT)
    result = judge_nccl(facts)
    assert result.status == Status.FAIL and result.summary.startswith("NCCL_IB_DISABLE=1 turns InfiniBand")
    assert result.summary.endswith("over TCP sockets (8 active RDMA ports here)")
    assert "~388 GB/s over InfiniBand" in result.detail
    assert result.remediation.commands[0] == "unset NCCL_IB_DISABLE"


def test_nccl_tests_between_nodes_with_ib_disabled_on_the_command_line_leads_with_it() -> None:
    """nccl-tests' `-x NCCL_IB_DISABLE=1` (NVIDIA/nccl-tests issue 82): the setting leads, over the missing
    libibverbs NCCL also printed, and bench.nccl-tests' finding folds beneath it."""
    path = PASTES / "network" / "nccl-tests-broadcast-2-nodes-ib-disabled-failed-to-open-libibverbs-2.9.6-partial.txt"
    (first, *_) = network.causes(snapshot(path))
    assert first.id == "nccl-ib-disabled"


def test_fewer_nics_used_than_the_node_has() -> None:
    """NCCL naming 3 NICs (issue 1066) where the node's ibstat shows 8 active: the others carry nothing. The H800
    log (issue 1052) names one NIC with NCCL_IB_HCA, for one GPU a node: all it needs."""
    facts = snapshot(PASTES / "nccl" / "info-2.12.12-ib-roce-nvmlwrap-warn.txt", IBSTAT)
    (cause,) = network.causes(facts)
    assert cause.id == "nccl-nics-unused" and "NCCL uses 3 of the 8 RDMA NICs here" in cause.summary
    one_gpu = snapshot(PASTES / "nccl" / "info-2.18.5-roce-h800-two-nodes.txt", IBSTAT)
    assert network.gpus_per_node(one_gpu) == 1 and network.causes(one_gpu) == []


def test_nics_shared_by_gpus_where_the_node_has_no_more() -> None:
    facts = {"nccl": {"net": "IB", "ib_devices": ["mlx5_0:1/IB", "mlx5_1:1/IB"], "local_ranks": 8}}
    (cause,) = network.causes(facts)
    assert cause.id == "nccl-nics-shared" and "2 NICs for 8 GPUs a node" in cause.summary


def test_settings_that_differ_between_the_nodes_of_a_log_are_a_cause() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.",
        "b:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
    ]
    facts = to_snapshot("log", read("\n".join(lines)))
    ids = [c.id for c in network.causes(facts)]
    assert "nccl-settings-differ" in ids


def test_a_container_without_dev_infiniband_on_a_node_with_rdma_ports() -> None:
    facts = snapshot(IBSTAT)
    facts["system"].update(container="docker", rdma_devices=[])
    (cause,) = network.causes(facts)
    assert cause.id == "rdma-devices-hidden" and cause.status == Status.FAIL
    assert any("--device=/dev/infiniband" in c for c in cause.remediation.commands)


def test_socket_figure_from_the_interface_speed() -> None:
    """NCCL on sockets over a 25 Gb/s interface: 60 % of its line rate (NVIDIA/nccl issue 209)."""
    facts = snapshot(FABRICS / "socket-docker-enp67s0-no-ib-device-partial.txt")
    facts["system"]["links"] = [{"name": "enp67s0", "up": True, "speed_mbps": 25000}]
    found = network.fabric(facts)
    assert found.expected_chosen.value == pytest.approx(25 / 8 * 0.6)
    assert "issue 209" in found.expected_chosen.source


def test_a_multi_node_nccl_tests_run_is_expected_at_its_fabric_s_published_share() -> None:
    """nccl-tests between nodes: NICs x line rate x the share published for the fabric the file's NCCL log names
    (EFA's from the B200 run over EFA v4, below InfiniBand's 48.5 of 50 GB/s), else the ports' own link layer."""
    ports = [
        {"device": f"rdmap{i}s0", "port": 1, "state": "4: ACTIVE", "rate": "400 Gb/sec", "link_layer": "Unspecified"}
        for i in range(8)
    ]
    run, found = {"env": {}}, {"gpus": 16, "nodes": 2}
    efa = snapshot(FABRICS / "efa-libfabric-16-nics-p5en-8xh200-partial.txt")
    efa["system"]["infiniband"] = ports
    expected = benchmarks.nic_expectation(run, found, benchmarks.shown_in(efa))
    assert expected.value == pytest.approx(8 * 400 / 8 * network.fabric_share("efa")[0])
    assert "Gb/s of EFA" in expected.source and "EFA NIC" in expected.source
    ib = {
        "system": {
            "infiniband": [{**p, "device": f"mlx5_{i}", "link_layer": "InfiniBand"} for i, p in enumerate(ports)]
        }
    }
    expected = benchmarks.nic_expectation(run, found, benchmarks.shown_in(ib))
    assert (
        expected.value == pytest.approx(8 * 400 / 8 * network.fabric_share("ib")[0])
        and "of InfiniBand" in expected.source
    )
    assert network.fabric_share("efa")[0] < network.fabric_share("ib")[0]


def test_every_fabric_has_its_published_share_or_says_none() -> None:
    assert network.fabric_share("ib")[0] == pytest.approx(48.5 / 50)
    assert 0.5 < network.fabric_share("efa")[0] < 0.9 and "ml-engineering" in network.fabric_share("efa")[1]
    assert network.fabric_share("cxi") is None and network.fabric_share("tcpx") is None
    assert network.fabric_of("GPUDirectTCPX_v7", {}) == "tcpx" and network.fabric_of("IBext_v8", {}) == "ib"


def test_a_pasted_log_leads_the_report_with_its_cause() -> None:
    """`gpudoctor check --from` a real log: the cause first, with its cure, exit code 1 for a failure."""
    proc = gpudoctor("check", "--from", str(FABRICS / "cxi-alps-warn-network-aws-libfabric-not-found.txt"), "--json")
    report = json.loads(proc.stdout)
    assert report["causes"][0]["id"] == "nccl-net-setting" and proc.returncode == 1
    assert "unset NCCL_NET  # or load the plugin" in report["causes"][0]["remediation"]["commands"]
    checks = {c["check_id"]: c for c in report["checks"]}
    assert checks["network.nccl"]["explained_by"] == "nccl-net-setting"


def test_a_cloud_h100_node_whose_nics_topo_m_does_not_show_is_judged_by_its_log_alone() -> None:
    """GCP A3's `topo -m` in a GKE pod (8 H100, NV18 between every pair, NUMA 0 and 1, no NIC column: its gVNIC and
    GPU NICs are not RDMA devices NVML lists) beside its TCPX log: NCCL's choice is said, no GPU is called far
    from a NIC, and no figure is invented for a fabric without a published one."""
    topo = FABRICS / "topo" / "h100-8gpu-nv18-no-nic-columns-gcp-a3-gke-pod.txt"
    facts = snapshot(topo, FABRICS / "tcpx-a3-highgpu-using-network-gpudirecttcpx-v7-plugin-init-partial.txt")
    topology = facts["nvml"]["topology"]
    assert topology["indexes"] == list(range(8)) and {n for row in topology["nvlinks"] for n in row} == {None, 18}
    assert not topology.get("nics") and network.causes(facts) == []
    result = judge_nccl(facts)
    assert result.status == Status.PASS and "nearest NIC" not in (result.detail or "")
    said = "NCCL chose NET/GPUDirectTCPX_v7 (GPUDirect-TCPX); no published all-reduce figure for GPUDirect-TCPX"
    assert result.summary == said


# --- each cause of issue 50 leads the diagnosis with its setting ------------------------------------------------

SOCKET_LOG = FABRICS / "socket-docker-enp67s0-no-ib-device-partial.txt"
NO_VERBS_LOG = PASTES / "nccl" / "info-2.20.5-no-libibverbs-socket-fallback-l20.txt"


def leading(facts: dict[str, Any], *results: Result) -> list[Any]:
    """The causes of network.nccl's verdict over `facts` (and any other results), as the report orders them."""
    judged = judge_nccl(facts)
    judged.check_id = "network.nccl"
    return diagnose(Evidence([judged, *results], facts, live=False))


def test_nccl_net_forcing_sockets_where_the_node_has_rdma_ports_leads_with_unsetting_it() -> None:
    """A socket log (NVIDIA/nccl issue 1105) with NCCL_NET=Socket beside ibstat's 8 active ports: the setting leads,
    a failure, with `unset NCCL_NET`."""
    facts = snapshot(SOCKET_LOG, IBSTAT)
    facts["system"]["env"] = {"NCCL_NET": "Socket"}
    (first, *_) = leading(facts)
    assert first.id == "nccl-net-setting" and first.status == Status.FAIL, first
    assert "NCCL_NET='Socket'" in first.summary and "unset NCCL_NET" in first.remediation.commands


def test_libibverbs_missing_on_a_node_with_rdma_ports_leads_with_installing_it() -> None:
    """NCCL 2.20.5's "Failed to open libibverbs.so[.1]" and its socket fallback, on a node whose ibstat shows 8
    active ports: the missing library leads (a failure: the ports carry nothing), with the package to install."""
    (first, *_) = leading(snapshot(NO_VERBS_LOG, IBSTAT))
    assert first.id == "nccl-no-libibverbs" and first.status == Status.FAIL, first
    assert any("libibverbs" in c for c in first.remediation.commands[1:]), first.remediation.commands


def test_nccl_net_gdr_level_turning_gpudirect_rdma_off_leads_with_unsetting_it() -> None:
    """A two-node IB log (issue 1412) with NCCL's own line for the setting (src/misc/param.cc's "set by environment
    to"): GPUDirect RDMA off by NCCL_NET_GDR_LEVEL=LOC leads, with `unset NCCL_NET_GDR_LEVEL`."""
    log = (FABRICS / "ib-nnodes-2-localranks-8-channels-trees-partial.txt").read_text()
    facts = to_snapshot("log", read("h:1:2 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC\n" + log))
    (first, *_) = leading(facts)
    assert first.id == "nccl-gdr-level" and "unset NCCL_NET_GDR_LEVEL" in first.remediation.commands, first


def test_pcie_acs_on_the_p2p_path_leads_with_turning_it_off() -> None:
    """lspci's ACSCtl SrcValid+ on an AMD PCIe switch where NCCL hung between two GPUs (NVIDIA/nccl issue 606): ACS
    leads, P2P and GPUDirect RDMA through the root complex, with the setpci command that turns it off."""
    path = PASTES / "network" / "lspci-acsctl-srcvalid-plus-amd-pcie-nccl-test-hangs-gpu2-gpu3.txt"
    report = json.loads(gpudoctor("check", "--from", str(path), "--json").stdout)
    first = report["causes"][0]
    assert first["id"] == "pcie-acs-on" and "health.pcie:pcie-acs-enabled" in first["explains"], first
    assert any("ECAP_ACS+0x6.w=0000" in c for c in first["remediation"]["commands"])


def test_nodes_whose_nccl_settings_differ_lead_on_rank_0_and_in_a_log() -> None:
    """Rank 0 of a cluster run: node b runs with NCCL_IB_DISABLE=1, a with it unset; and a log of two hosts that
    printed different values: the difference leads, with the commands that show every node's settings."""
    nodes = [
        {"name": "a", "software": {"settings": {}}},
        {"name": "b", "software": {"settings": {"NCCL_IB_DISABLE": "1"}}},
    ]
    (first,) = diagnose(Evidence([], {}, nodes=nodes))
    assert first.id == "nccl-settings-differ" and first.where == ["NCCL_IB_DISABLE"]
    assert "1 on b" in first.summary and "unset on a" in first.summary
    lines = [
        "a:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.",
        "b:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
    ]
    (first, *_) = leading(to_snapshot("log", read("\n".join(lines))))
    assert first.id == "nccl-settings-differ" and "env | grep ^NCCL_  # on every node" in first.remediation.commands


def test_a_socket_setting_on_a_down_interface_leads_with_the_one_to_use() -> None:
    system = system_with({"GLOO_SOCKET_IFNAME": "eth1"})
    result = judge_interfaces(system, spans_nodes=True)
    result.check_id = "network.interfaces"
    (first, *_) = diagnose(Evidence([result], {"system": system}, live=False))
    assert first.id == "socket-interface-down" and first.status == Status.FAIL, first
    assert "export GLOO_SOCKET_IFNAME=eth0" in first.remediation.commands and result.explained_by == first.id


# --- NCCL's own WARN lines about the network --------------------------------------------------------------------

TCPX = FABRICS / "tcpx-a3-gpudirecttcpx-rx-ctrl-timeout-warn-two-nics.txt"


def test_a_network_plugin_s_warn_is_a_warning_that_quotes_it() -> None:
    """GPUDirect-TCPX's "rx ctrl timeout" (NVIDIA/nccl issue 1652; net_tcpx.cc: a peer sent no control message
    within the plugin's 10 s threshold): the check no longer passes. It warns, quotes each WARN line as the log has
    it, and says what the line means, beside what NCCL chose."""
    result = judge_nccl(snapshot(TCPX))
    assert result.status == Status.WARN, result.summary
    assert result.summary.startswith(
        "the GPUDirect-TCPX plugin warned 2 times: a peer sent no control message for 10 s"
    )
    assert "'0xadca8062b70:0xadca805d0f0, nic 0, enp12s0," in result.summary
    assert result.quotes[0].startswith("line 1: tcpxResult_t tcpxCommProgress(tcpxComm*):1231 NCCL WARN 0xadca")
    assert len(result.quotes) == 2 and result.quotes[1].startswith("line 3: ") and "ctrl timeout" in result.quotes[1]
    assert "10 s" in result.remediation.why and "1652" in result.remediation.source
    assert "NCCL chose NET/GPUDirectTCPX (GPUDirect-TCPX), 2 NICs" in result.detail
    assert [row.status for row in result.rows] == [Status.WARN, Status.WARN]


@pytest.mark.parametrize(
    ("path", "signature"),
    [
        (PASTES / "nccl" / "warn-net-ib-completion-error-12-azure.txt", "nccl-ib-retry-exceeded"),
        (PASTES / "nccl" / "warn-ib-plugin-completion-status-12-vendor-err-129.txt", "nccl-ib-retry-exceeded"),
        (PASTES / "nccl" / "warn-2.8.3-tensorflow-ibv-create-qp-failed.txt", "nccl-ibv-call-failed"),
        (PASTES / "nccl" / "warn-ibv-create-cq-cannot-allocate-memory-h200.txt", "nccl-ibv-cannot-allocate-memory"),
        (PASTES / "nccl" / "warn-net-ofi-unable-to-register-memory-pdsh-prefixed.txt", "nccl-ofi-register-memory"),
        (
            PASTES / "network" / "warn-ibv-modify-qp-110-connection-timed-out-gid-index-3-rail-cross-nic-2.27.txt",
            "ib-qp-timeout-rail-network",
        ),
    ],
)
def test_a_warn_where_a_connection_failed_fails_and_points_at_the_known_cure(path: Path, signature: str) -> None:
    """Real logs whose network WARN says a connection between nodes failed (a completion with an error, a verbs
    call that failed, memory the NIC could not register): a failure quoting the line; gpudoctor knows each line
    (a signature), so the cure is the signature's, named, not written twice."""
    facts = snapshot(path)
    result = judge_nccl(facts)
    assert result.status == Status.FAIL, result.summary
    assert result.quotes and " NCCL WARN " in result.quotes[0] and result.quotes[0].startswith("line ")
    assert f"(signature {signature})" in result.remediation.why
    assert "'" in result.summary, "the WARN is named in quotes"


def test_a_peer_that_closed_its_connection_is_a_warning_that_looks_at_the_peer() -> None:
    """socket.cc's "Connection closed by remote peer" (NVIDIA/nccl src/misc/socket.cc, socketProgress): the peer's
    process went away, most often because it failed first; the network is not blamed for it."""
    line = "a:1:2 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer b<51304>"
    result = judge_nccl(to_snapshot("log", read(line)))
    assert result.status == Status.WARN and "closed" in result.summary
    assert "first error" in result.remediation.why


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (PASTES / "nccl" / "info-2.12.12-ib-roce-nvmlwrap-warn.txt", Status.PASS),  # nvmlwrap: not the network
        (FABRICS / "made-here-2.30.7-cpu-bootstrap-cuda-driver-insufficient.txt", Status.SKIP),  # CUDA
        (PASTES / "nccl" / "warn-2.26.2-timestamped-nvls-cuda-failure-401-h100.txt", Status.SKIP),  # NVLink SHARP
    ],
)
def test_a_warn_from_outside_the_network_is_left_to_its_own_check(path: Path, status: Status) -> None:
    result = judge_nccl(snapshot(path))
    assert result.status == status and not result.quotes, result.summary


def test_a_fallback_warn_on_one_node_is_no_finding_and_between_nodes_is_its_cause_s() -> None:
    """NCCL's "Failed to open libibverbs" on one node (NVIDIA/nccl issue 257) costs nothing: no finding. Between
    nodes with NCCL_IB_DISABLE=1 (nccl-tests issue 82) the setting leads, and the WARN is quoted beneath it, not a
    second finding."""
    one = judge_nccl(snapshot(ROOT / "tests/fixtures/corpus/nccl-allreduce-hangs-1080ti-intel-iommu/paste.txt"))
    assert one.status in (Status.SKIP, Status.PASS) and not one.quotes
    path = PASTES / "network" / "nccl-tests-broadcast-2-nodes-ib-disabled-failed-to-open-libibverbs-2.9.6-partial.txt"
    result = judge_nccl(snapshot(path))
    assert result.status == Status.WARN and result.summary.startswith("NCCL_IB_DISABLE=1")
    assert [row.name for row in result.rows] == ["nccl-ib-disabled"]
    assert any("Failed to open libibverbs" in q for q in result.quotes)


def test_a_warn_beside_a_cause_is_quoted_and_the_cause_leads() -> None:
    """aws-ofi-nccl's "fi_getinfo() call failed" is the evidence of its cause (no provider): the cause leads the
    result; the WARN line is quoted."""
    result = judge_nccl(snapshot(FABRICS / "efa-ofi-fi-getinfo-failed-container-without-dev-infiniband-p5.txt"))
    assert result.summary.startswith("aws-ofi-nccl found no libfabric provider") and result.status == Status.FAIL
    assert result.quotes == [
        "line 1: nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available"
    ]


def test_warn_lines_kept_are_bounded() -> None:
    lines = [f"h:1:2 [0] transport/net_ib.cc:9 NCCL WARN NET/IB : Got completion from peer p{i} with error 12" for i in
             range(500)]  # fmt: skip
    kept = read_alone(nccl.read, "\n".join(lines)).facts["nccl"]["net_warnings"]
    assert len(kept) == nccl.MAX_NET_WARNINGS and kept[0]["line"] == 1


# --- the interfaces the socket settings name ----------------------------------------------------------------------


def system_with(env: dict[str, str]) -> dict[str, Any]:
    return {
        "env": env,
        "links": [
            {"name": "docker0", "up": True, "virtual": True, "bridge": True, "bridge_physical": False},
            {"name": "eth0", "up": True, "virtual": False, "bridge": False},
            {"name": "eth1", "up": False, "virtual": False, "bridge": False},
            {"name": "br0", "up": True, "virtual": True, "bridge": True, "bridge_physical": True},
            {"name": "lo", "up": True, "virtual": True, "bridge": False},
        ],
        "interface_addresses": [
            {"name": "docker0", "address": "172.17.0.1", "up": True},
            {"name": "eth0", "address": "10.0.0.5", "up": True},
            {"name": "br0", "address": "10.1.0.5", "up": True},
            {"name": "lo", "address": "127.0.0.1", "up": True},
        ],
    }


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"NCCL_SOCKET_IFNAME": "docker0"}, "docker0, which is a container or VM bridge"),
        ({"NCCL_SOCKET_IFNAME": "=docker0"}, "docker0, which is a container or VM bridge"),
        ({"GLOO_SOCKET_IFNAME": "eth1"}, "eth1, which is down"),
        ({"NCCL_SOCKET_IFNAME": "lo"}, "lo, which is the loopback interface"),
        ({"NCCL_SOCKET_IFNAME": "^eth,br,docker"}, "lo, which is the loopback interface"),
    ],
)
def test_a_socket_setting_on_an_unreachable_interface_names_the_one_to_use(env: dict[str, str], problem: str) -> None:
    result = judge_interfaces(system_with(env), spans_nodes=True)
    assert result.status == Status.FAIL and problem in result.summary and "eth0 can carry it" in result.summary
    setting = next(iter(env))
    assert f"export {setting}=eth0" in result.remediation.commands


@pytest.mark.parametrize(
    "env", [{"NCCL_SOCKET_IFNAME": "eth0"}, {"GLOO_SOCKET_IFNAME": "br0"}, {"NCCL_SOCKET_IFNAME": "eth,docker"}]
)
def test_a_bridge_over_a_physical_nic_and_a_good_interface_pass(env: dict[str, str]) -> None:
    assert judge_interfaces(system_with(env)).status == Status.PASS


def test_no_socket_setting_is_skipped_and_one_node_only_warns() -> None:
    assert judge_interfaces(system_with({})).status == Status.SKIP
    assert judge_interfaces(system_with({"NCCL_SOCKET_IFNAME": "docker0"})).status == Status.WARN


# --- what carried cluster mode's workloads ------------------------------------------------------------------------


def gloo(interface: str, address: str, networks: dict[str, list[str]]) -> dict[str, Any]:
    nets = {name: {"up": True, "cidrs": cidrs} for name, cidrs in networks.items()}
    return {"backend": "gloo", "interface": interface, "address": address, "networks": nets}


def two_nets(i: int) -> dict[str, list[str]]:
    return {"eth0": [f"10.0.0.{i}/24"], "eth1": [f"10.1.0.{i}/24"]}


def test_a_slow_node_on_another_network_is_told_the_interface_to_use() -> None:
    per_node = {
        "a": gloo("eth0", "10.0.0.1", two_nets(1)),
        "b": gloo("eth0", "10.0.0.2", two_nets(2)),
        "c": gloo("eth1", "10.1.0.3", two_nets(3)),
    }
    said = sockets.judge_transport(per_node, {"c"})
    assert said.status == Status.WARN and said.aspect == "transport"
    assert said.summary.startswith("c: its traffic left on eth1 (10.1.0.0/24), not on 10.0.0.0/24")
    assert said.detail == "measured over gloo over TCP on eth0 (a, b), eth1 (c)"
    assert "export GLOO_SOCKET_IFNAME=eth0  # on c" in said.remediation.commands
    same = sockets.judge_transport({**per_node, "c": gloo("eth0", "10.0.0.3", two_nets(3))}, {"c"})
    assert "the link itself is slow" in same.summary and "ethtool eth0  # on c" in same.remediation.commands
    assert sockets.judge_transport(per_node, set()).status == Status.PASS


def test_an_nccl_node_on_sockets_beside_rdma_nodes_is_named() -> None:
    ib = {"backend": "nccl", "networks": {}, "nccl": {"net": "IB", "ib_devices": ["mlx5_0:1/IB"], "gdrdma": "on"}}
    socket = {"backend": "nccl", "networks": {}, "nccl": {"net": "Socket"}}
    said = sockets.judge_transport({"a": ib, "b": ib, "c": socket}, set())
    assert said.status == Status.WARN
    assert said.summary.startswith("c: NCCL over NET/Socket (TCP sockets), where the other nodes use InfiniBand")


def test_a_transport_another_node_sent_is_checked_for_its_shape() -> None:
    assert sockets.transport_of({"backend": "mpi"}) is None and sockets.transport_of("eth0") is None
    said = sockets.transport_of(
        {"backend": "gloo", "interface": "x" * 500, "networks": {"eth0": {"cidrs": ["1"] * 99}}}
    )
    assert len(said["interface"]) == 64 and len(said["networks"]["eth0"]["cidrs"]) == 16


def test_rank_0_leads_with_the_slow_nodes_network_path() -> None:
    transport = sockets.judge_transport(
        {"a": gloo("eth0", "10.0.0.1", two_nets(1)), "b": gloo("eth0", "10.0.0.2", two_nets(2)),
         "c": gloo("eth1", "10.1.0.3", two_nets(3))},
        {"c"},
    )  # fmt: skip
    transport.check_id = "cluster.links"
    links = Result(Status.FAIL, "c slow", rows=[Row(Status.FAIL, "slow", node="c")], check_id="cluster.links")
    causes = diagnose(Evidence([links, transport], {}, nodes=[{"name": "a"}, {"name": "c"}]))
    assert causes[0].id == "node-network-path" and causes[0].where == ["c"]
    assert links.explained_by == "node-network-path"


# --- cluster mode on namespace hosts -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hosts():
    try:
        made = TwoNicHosts(3)
    except HostsUnavailable as exc:
        pytest.skip(str(exc))
    yield made
    made.remove()


def run_cluster(hosts: TwoNicHosts, tmp_path: Path, args: list[str], env: dict[int, dict[str, str]]) -> dict:
    """gpudoctor on every host with the environment srun gives (tests/test_cluster.py's way); rank 0's report."""
    config = tmp_path / "cluster.toml"
    config.write_text(LEAN_CLUSTER)
    out = tmp_path / "out"
    out.mkdir()
    procs = []
    for i, name in enumerate(hosts.names):
        node_env = {
            **os.environ,
            "NO_COLOR": "1",
            "SLURM_PROCID": str(i),
            "SLURM_STEP_NUM_TASKS": str(len(hosts.names)),
            "SLURM_STEP_NUM_NODES": str(len(hosts.names)),
            "SLURM_STEP_NODELIST": f"node-[0-{len(hosts.names) - 1}]",
            "SLURM_JOB_ID": "5050",
            "SLURM_STEP_ID": "0",
            "SLURMD_NODENAME": name,
            **env.get(i, {}),
        }
        argv = [str(Path(sys.executable).with_name("gpudoctor")), "check", *args, "--config", str(config)]
        argv += ["--json", "-o", str(out / "{node}.json")]
        procs.append(hosts.start(i, argv, node_env, tmp_path / f"{name}.log"))
    for proc in procs:
        proc.wait(timeout=300)
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    logs = {p.name: p.read_text()[-1500:] for p in tmp_path.glob("*.log")}
    return next((r for r in reports if "cluster" in r), {"logs": logs})


@pytest.mark.hosts
def test_cluster_mode_names_the_bridge_and_the_down_interface_with_the_setting_to_use(hosts, tmp_path: Path) -> None:
    """node-0's NCCL_SOCKET_IFNAME on docker0 (a bridge, 172.17.0.1 on every host), node-1's GLOO_SOCKET_IFNAME on
    its eth1, which is down: each is named by rank 0 as that node's cause, with the export that fixes it."""
    hosts.set_link(1, "eth1", "down")
    try:
        env = {
            0: {"NCCL_SOCKET_IFNAME": "docker0", "GLOO_SOCKET_IFNAME": "eth0"},
            1: {"GLOO_SOCKET_IFNAME": "eth1"},
            2: {"GLOO_SOCKET_IFNAME": "eth0"},
        }
        leader = run_cluster(hosts, tmp_path, ["--only", "cluster.nodes", "network.interfaces"], env)
    finally:
        hosts.set_link(1, "eth1", "up")
    causes = {c["id"]: c for c in leader["causes"]}
    bridge = causes["node-0:socket-interface-unreachable"]
    assert (
        "NCCL_SOCKET_IFNAME='docker0' puts NCCL's sockets on docker0, which is a container or VM bridge"
        in (bridge["summary"])
    )
    assert "export NCCL_SOCKET_IFNAME=eth0" in bridge["remediation"]["commands"]
    down = causes["node-1:socket-interface-down"]
    assert "GLOO_SOCKET_IFNAME='eth1'" in down["summary"] and "which is down" in down["summary"]
    assert "export GLOO_SOCKET_IFNAME=eth0" in down["remediation"]["commands"]
    assert leader["cluster"]["failed_nodes"] == ["node-0", "node-1"]


@pytest.mark.hosts
def test_cluster_mode_says_the_transport_and_names_the_slow_link_with_what_shows_it(hosts, tmp_path: Path) -> None:
    """node-2's eth0 limited to 100 Mbit/s both ways, every node's gloo on eth0: cluster.links names node-2 slow,
    says what carried it (gloo over TCP on eth0), and the cause leads: node-2's link itself is slow, with the
    commands that show it (tc shows the shaper) and, as the other way, eth1's network, which every node shares."""
    hosts.limit(2, "100mbit")
    env = {i: {"GLOO_SOCKET_IFNAME": "eth0"} for i in range(3)}
    leader = run_cluster(hosts, tmp_path, ["--only", "cluster.links"], env)
    checks = {c["check_id"] + (":" + c["aspect"] if c["aspect"] else ""): c for c in leader["checks"]}
    links, transport = checks["cluster.links"], checks["cluster.links:transport"]
    assert "measured over gloo over TCP on eth0" in links["detail"]
    assert leader["cluster"]["failed_nodes"] == ["node-2"], [(r["node"], r["summary"]) for r in links["rows"]]
    assert [r["node"] for r in transport["rows"] if r["status"] == "warn"] == ["node-2"]
    cause = leader["causes"][0]
    assert cause["id"] == "node-network-path" and cause["where"] == ["node-2"], cause
    assert (
        cause["summary"].startswith("node-2: slow over eth0 (10.213.") and "the link itself is slow" in cause["summary"]
    )
    assert "tc qdisc show dev eth0  # on node-2" in cause["remediation"]["commands"]
    moved = cause["remediation"]["instead"]["commands"][0]
    assert (
        moved.startswith("export GLOO_SOCKET_IFNAME=eth1 NCCL_SOCKET_IFNAME=eth1  # on node-2") and "10.214." in moved
    )
    assert links["explained_by"] == "node-network-path"


def test_a_gpu_whose_nearest_nic_is_across_the_cpu_is_named_where_its_neighbours_have_one_beside_them() -> None:
    """`topo -m` (the reader's shape: NVML's levels, 10 PIX .. 50 SYS) of a node with RDMA ports: GPU 1's nearest
    NIC is NODE (through the CPU) while GPU 0 has one on its switch; a board where no GPU has one is its layout."""
    facts = snapshot(IBSTAT)
    nics = [
        {"name": "NIC0", "device": "mlx5_0", "levels": [10, 40]},
        {"name": "NIC1", "device": "mlx5_1", "levels": [50, 50]},
    ]
    facts["nvml"] = {"topology": {"indexes": [0, 1], "nics": nics}, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}
    (cause,) = network.causes(facts)
    assert cause.id == "nic-far-from-gpu" and "GPU 1 / HCA mlx5_0: distance NODE > PXB" in cause.summary
    nics[0]["levels"] = [40, 40]
    assert network.causes(facts) == []
    facts["nvml"]["gpus"] = [{"name": "NVIDIA GH200 480GB"}]
    nics[0]["levels"] = [10, 50]
    assert network.causes(facts) == [], "a Grace board reaches its NICs over C2C, which topo -m shows as SYS"


def test_nccl_bootstrapping_on_docker0_between_nodes_is_named_from_its_log() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.2<0>",
        "a:1:2 [0] NCCL INFO Channel 00 : 1[1000] -> 0[1000] [receive] via NET/Socket/0",
    ]
    facts = to_snapshot("log", read("\n".join(lines)))
    causes = diagnose(Evidence([], facts, live=False))
    assert causes[0].id == "socket-interface-unreachable" and causes[0].status == Status.FAIL
    assert causes[0].summary.startswith("NCCL's log shows it on docker0 (NCCL_SOCKET_IFNAME unset)")
    one_node = to_snapshot("log", read(lines[0]))
    assert diagnose(Evidence([], one_node, live=False)) == []


# An nccl-tests run on one host that ends in NCCL's system error, as nccl-tests and torch print it: the device list
# (nccl-tests src/common.cu, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s"), NCCLCHECK's failure
# line (src/common.h, "%s: Test NCCL failure %s:%d '%s'" before v2.13.0) and torch's NCCL_CHECK ("NCCL Error 2:
# unhandled system error", torch/csrc/cuda/nccl.cpp with ncclGetErrorString(ncclSystemError), src/misc/utils.cc).
ONE_HOST_SYSTEM_ERROR = """# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 \
validation: 1
#
# Using devices
#   Rank  0 Pid   4121 on     node07 device  0 [0x3b] NVIDIA GeForce RTX 3090
#   Rank  1 Pid   4121 on     node07 device  1 [0x5e] NVIDIA GeForce RTX 3090
node07: Test NCCL failure common.cu:958 'unhandled system error'
RuntimeError: NCCL Error 2: unhandled system error
"""


def test_nccl_system_error_with_every_rank_on_one_host_names_its_shared_memory() -> None:
    """NCCL's system error with no WARN line, from a run whose ranks are all on one host: between GPUs of one node
    NCCL's calls to the system are its shared memory (NCCL troubleshooting, Sharing Data), most often a container's
    64 MB /dev/shm; the cause leads with df -h /dev/shm and the container settings that give it more."""
    facts = to_snapshot("paste.txt", read(ONE_HOST_SYSTEM_ERROR))
    first = diagnose(Evidence([], facts, live=False))[0]
    assert first.id == "nccl-system-error-one-node" and first.status == Status.WARN, first
    commands = " ".join(first.remediation.commands)
    assert "df -h /dev/shm" in commands and "--ipc=host" in commands and "--shm-size" in commands, commands
    assert "medium: Memory" in commands, commands


def test_nccl_system_error_between_nodes_or_with_a_warn_line_is_not_put_on_shared_memory() -> None:
    """Two hosts in the device list, or a WARN line that names the failing call: the one-node rule stays out (the
    network's causes or the WARN's own signature speak)."""
    two = ONE_HOST_SYSTEM_ERROR.replace("on     node07 device  1", "on     node08 device  1")
    warn = "node07:4121:4150 [0] include/socket.h:403 NCCL WARN Connect to 10.0.0.2<3456> failed\n"
    warned = ONE_HOST_SYSTEM_ERROR + warn
    bare = "RuntimeError: NCCL Error 2: unhandled system error\n"
    for text in (two, warned, bare):
        facts = to_snapshot("paste.txt", read(text))
        assert "nccl-system-error-one-node" not in [c.id for c in diagnose(Evidence([], facts, live=False))], text


def test_one_node_nccl_log_without_rdma_devices_warns_no_machine_check() -> None:
    """A single rank's NCCL 2.19.3 INFO log on a cloud VM without RDMA NICs (NCCL prints "NET/IB : No device found"
    on every machine without one, src/transport/net_ib.cc): a working machine, whose INFO lines are no finding of
    system.infiniband or any other machine check."""
    path = PASTES / "nccl" / "info-2.19.3-single-rank-socket-gcp.txt"
    facts = snapshot(path)
    report = json.loads(gpudoctor("check", "--from", str(path), "--json").stdout)
    judged = [c for c in report["checks"] if c["status"] in ("warn", "fail") and not c["check_id"].startswith("prog")]
    assert not judged and not report["causes"], (judged, report["causes"])
    assert facts["nccl"]["no_rdma"], facts["nccl"]  # the reader keeps the fact for network.nccl's own judgement


# torch's NCCL error as ProcessGroupNCCL words it (C10D_NCCL_CHECK, torch/csrc/distributed/c10d/NCCLUtils.hpp, with
# ncclGetErrorString(ncclSystemError)) beside the launch command that started it: torchrun's --nnodes takes a count or
# <min>:<max> (torch/distributed/run.py), DeepSpeed's launcher --num_nodes (deepspeed/launcher/runner.py), Accelerate's
# --num_machines (accelerate/commands/launch.py).
SYSTEM_ERROR = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.14.3\n"


@pytest.mark.parametrize(
    "launch",
    [
        "torchrun \\\n    --nnodes=2 \\\n    --nproc_per_node=8 \\\n    train.py\n",
        "torchrun --nnodes 1:3 --nproc-per-node 4 --rdzv-backend c10d train.py\n",
        "deepspeed --num_nodes=2 --num_gpus=8 train.py\n",
        "accelerate launch --num_machines 2 --machine_rank 0 train.py\n",
    ],
)
def test_nccl_system_error_of_a_job_launched_on_several_nodes_names_the_sockets_between_them(launch: str) -> None:
    """NCCL's system error with no WARN line, from a job its launch command spreads over several nodes: the calls
    between nodes are NCCL's sockets (NCCL troubleshooting, IP Network Interfaces): the interface NCCL_SOCKET_IFNAME
    names, and containers' host networking, lead."""
    facts = to_snapshot("paste.txt", read(SYSTEM_ERROR + launch))
    assert facts["nccl"]["launch_nodes"] > 1, facts.get("nccl")
    first = diagnose(Evidence([], facts, live=False))[0]
    assert first.id == "nccl-system-error-between-nodes" and first.status == Status.WARN, first
    commands = " ".join(first.remediation.commands)
    assert "NCCL_SOCKET_IFNAME" in commands and "--network=host" in commands and "hostNetwork" in commands, commands


def test_a_launch_command_on_one_node_names_no_network_between_nodes() -> None:
    """--nnodes=1 (or no node count) is one node: the between-nodes rule stays out."""
    for launch in ("torchrun --nnodes=1 --nproc_per_node=8 train.py\n", "torchrun --standalone train.py\n"):
        facts = to_snapshot("paste.txt", read(SYSTEM_ERROR + launch))
        assert "nccl-system-error-between-nodes" not in [c.id for c in diagnose(Evidence([], facts, live=False))]
