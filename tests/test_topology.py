"""`nvidia-smi topo -m` judged: every figure it holds is named against what the board should show (the NVLinks of
each GPU pair, the NIC near each GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.common import FIXTURES, judge

from gpudoctor.checks.network import judge_nccl
from gpudoctor.judging import network, nics
from gpudoctor.model import Status
from gpudoctor.paste import inputs, read, to_snapshot

TOPO = FIXTURES / "benchmarks" / "topo"
FABRIC_TOPO = FIXTURES / "pastes" / "fabrics" / "topo"  # real `topo -m` of multi-node machines, cited in SOURCES.md
A4 = "../../../benchmarks/topo/b200-8gpu-8nic-gcp-a4.txt"  # the fabric fixtures' sibling, with its NIC Legend


def judged(path: Path) -> dict:
    return judge(inputs.load(path))["p2p.topology"]


@pytest.mark.parametrize(
    "name", ["b200-8gpu-8nic-gcp-a4.txt", "h100-sxm-8gpu-hgx-nv18.txt", "a100-sxm-8gpu-hgx-nv12-condensed.txt"]
)
def test_healthy_boards_pass_with_their_links_and_nics_named(name: str) -> None:
    result = judged(TOPO / name)
    assert result.status == Status.PASS, result.summary
    assert all(r.summary.startswith("NV") for r in result.rows), [r.summary for r in result.rows]


def test_the_nics_of_a_real_b200_node_are_read_with_their_devices() -> None:
    nics = inputs.load(TOPO / "b200-8gpu-8nic-gcp-a4.txt")["nvml"]["topology"]["nics"]
    assert [n["device"] for n in nics] == [f"mlx5_{i}" for i in range(8)]
    assert nics[0]["levels"] == [10, 10, 40, 40, 50, 50, 50, 50]


def degraded(tmp_path: Path) -> Path:
    """The real B200 node with GPU 3 - GPU 5 down to 12 NVLinks and GPUs 6 and 7 without their PIX NICs."""
    lines = (TOPO / "b200-8gpu-8nic-gcp-a4.txt").read_text().split("\n")

    def edit(row: int, column: int, value: str) -> None:
        cells = lines[row].split()
        cells[column + 1] = value
        lines[row] = "    ".join(cells)

    edit(4, 5, "NV12")
    edit(6, 3, "NV12")
    for row in (7, 8):
        edit(row, 8 + 6, "SYS")
        edit(row, 8 + 7, "SYS")
    path = tmp_path / "topo.txt"
    path.write_text("\n".join(lines))
    return path


def test_a_pair_with_links_down_fails_and_a_gpu_far_from_every_nic_warns(tmp_path: Path) -> None:
    result = judged(degraded(tmp_path))
    assert result.status == Status.FAIL
    by_gpu = {r.index: r for r in result.rows}
    assert by_gpu[3].summary == "NV12 to GPU 5 (NV18 on this board: 6 NVLinks down)"
    assert by_gpu[6].status == Status.WARN and "nearest NIC mlx5_4 is NODE away" in by_gpu[6].summary
    assert by_gpu[0].status == Status.PASS and by_gpu[0].summary == "NV18 to 7 GPUs, nearest NIC PIX"
    assert result.remediation.commands[0] == "nvidia-smi nvlink -s -i 3,5,6,7"


def test_a_board_whose_nics_all_sit_far_is_not_blamed_without_its_model() -> None:
    """A GH200 shows its NICs SYS away (NVLink-C2C and the Grace CPU between): no GPU here has a NIC near and
    the board is not named, so nothing is held against it."""
    assert judged(TOPO / "gh200-480gb-1gpu-2nic.txt").status == Status.PASS


def test_a_live_node_s_nvml_topology_is_judged_too() -> None:
    result = judge("h100-sxm-8x")["p2p.topology"]
    assert result.status in (Status.PASS, Status.SKIP), result.summary


# Each GPU row a real `topo -m` kept -> its nearest NIC and PCIe distance, as the thread's matrix shows it
# (tests/fixtures/pastes/fabrics/SOURCES.md). Cut matrices keep their rows' NIC cells under their own column.
NEAREST = {
    # all eight rows, tab-separated, a ninth NIC SYS from every GPU (a front-end port), the NIC rows cut
    "h100-8gpu-9nic-tabs-nccl-1453-partial.txt": [(g, f"NIC{8 - g}", "PIX") for g in range(8)],
    # six of eight rows
    "8gpu-9nic-nv8-pytorch-106190-six-rows-partial.txt": [
        (0, "NIC2", "PIX"),
        (1, "NIC4", "PIX"),
        (2, "NIC6", "PIX"),
        (3, "NIC8", "PIX"),
        (4, "NIC1", "PIX"),
        (5, "NIC3", "PIX"),
    ],
    # `topo -mp`, four of eight rows, fourteen NICs with a header spaced unevenly ("NIC11    NIC12")
    "8gpu-14nic-topo-mp-deepep-60-four-rows-partial.txt": [
        (0, "NIC0", "PIX"),
        (1, "NIC1", "PIX"),
        (2, "NIC2", "PIX"),
        (3, "NIC7", "PIX"),
    ],
    # 16 GPUs, the older header naming each NIC by its device (mlx5_0 ..), four of sixteen rows
    "16gpu-10nic-mlx5-columns-nccl-tests-78-four-rows-partial.txt": [
        (0, "mlx5_0", "PIX"),
        (1, "mlx5_0", "PIX"),
        (2, "mlx5_1", "PIX"),
        (3, "mlx5_1", "PIX"),
    ],
    # 56 of 76 NICs shown (nvidia-smi's own cut), two rows
    "8gpu-56-of-76-nics-shown-tabs-vllm-14537-two-rows-partial.txt": [(0, "NIC0", "PXB"), (1, "NIC3", "PXB")],
    # H20 over RoCE: every other GPU has no NIC under its switch
    "h20-8gpu-5nic-roce-deepep-137-seven-rows-partial.txt": [
        (0, "NIC0", "PIX"),
        (1, "NIC0", "NODE"),
        (2, "NIC1", "PIX"),
        (3, "NIC0", "NODE"),
        (4, "NIC2", "PIX"),
        (5, "NIC2", "NODE"),
        (6, "NIC4", "PIX"),
    ],
    # A40s with two NICs: half the GPUs reach theirs through the host bridges
    "a40-8gpu-2nic-cx7-nccl-1343-partial.txt": [
        (0, "NIC0", "NODE"),
        (1, "NIC0", "NODE"),
        (2, "NIC0", "PIX"),
        (3, "NIC0", "PIX"),
        (4, "NIC1", "NODE"),
        (5, "NIC1", "NODE"),
        (6, "NIC1", "PIX"),
        (7, "NIC1", "PIX"),
    ],
    # with its NIC Legend: the devices are named
    A4: [(g, f"mlx5_{g}", "PIX") if g % 2 == 0 else (g, f"mlx5_{g - 1}", "PIX") for g in range(8)],
}


def nearest_of(path: Path) -> list[tuple[int, str, str]]:
    topology = inputs.load(path)["nvml"]["topology"]
    return [(n["gpu"], n["nic"], n["distance"]) for n in nics.nearest_nics(topology)]


@pytest.mark.parametrize("name", sorted(NEAREST))
def test_each_gpu_s_nearest_nic_and_distance_are_read_from_real_matrices(name: str) -> None:
    assert nearest_of(FABRIC_TOPO / name) == NEAREST[name]


def test_a_cut_matrix_keeps_the_header_s_nic_count_and_the_rows_it_has() -> None:
    topology = inputs.load(FABRIC_TOPO / "8gpu-56-of-76-nics-shown-tabs-vllm-14537-two-rows-partial.txt")["nvml"][
        "topology"
    ]
    assert topology["indexes"] == [0, 1]
    assert len(topology["nics"]) == 56 and all(len(n["levels"]) == 2 for n in topology["nics"])
    assert topology["nics"][55]["levels"] == [40, 40]  # the last NIC column, NODE from both rows


def wrapped(path: Path, width: int, tmp_path: Path) -> Path:
    """The real matrix as a narrow window or a mail client wraps it: each line broken between words at `width`."""
    lines = []
    for line in path.read_text().splitlines():
        while len(line) > width and " " in line[:width]:
            cut = line[:width].rstrip().rfind(" ")
            lines.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
        lines.append(line)
    out = tmp_path / f"wrapped-{width}.txt"
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_wrapped_matrix_reads_as_the_whole_one(width: int, tmp_path: Path) -> None:
    name = "h20-8gpu-5nic-roce-deepep-137-seven-rows-partial.txt"
    whole = inputs.load(FABRIC_TOPO / name)["nvml"]
    folded = inputs.load(wrapped(FABRIC_TOPO / name, width, tmp_path))["nvml"]
    assert folded["topology"] == whole["topology"]
    assert nearest_of(wrapped(FABRIC_TOPO / name, width, tmp_path)) == NEAREST[name]


def test_gpus_whose_nearest_nic_is_past_the_host_bridge_are_named_where_others_have_one_near() -> None:
    facts = inputs.load(FABRIC_TOPO / "h20-8gpu-5nic-roce-deepep-137-seven-rows-partial.txt")
    far = network.far_in_topology(facts)
    assert [(f["gpu"], f["hca"], f["distance"]) for f in far] == [
        ("GPU 1", "NIC0", "NODE"),
        ("GPU 3", "NIC0", "NODE"),
        ("GPU 5", "NIC2", "NODE"),
    ]


def test_the_network_check_says_each_gpu_s_nearest_nic_and_names_those_past_the_host_bridge() -> None:
    """A real H20 matrix over RoCE beside a real two-node IB log: network.nccl leads with nic-far-from-gpu for the
    GPUs whose nearest NIC is NODE away, and its detail gives every GPU's nearest NIC."""
    text = "\n".join(
        (FABRIC_TOPO / name).read_text()
        for name in (
            "h20-8gpu-5nic-roce-deepep-137-seven-rows-partial.txt",
            "../ib-nnodes-2-localranks-8-channels-trees-partial.txt",
        )
    )
    result = judge_nccl(to_snapshot("paste.txt", read(text)))
    assert result.rows[0].name == "nic-far-from-gpu" and "GPU 1 / HCA NIC0: distance NODE > PXB" in result.summary
    assert "nearest NIC: GPU 0 NIC0 PIX, GPU 1 NIC0 NODE, GPU 2 NIC1 PIX" in result.detail, result.detail
