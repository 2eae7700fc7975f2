"""`nvidia-smi topo -m` judged: every figure it holds is named against what the board should show (the NVLinks of
each GPU pair, the NIC near each GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.common import FIXTURES, judge

from gpudoctor.model import Status
from gpudoctor.paste import inputs

TOPO = FIXTURES / "benchmarks" / "topo"


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
