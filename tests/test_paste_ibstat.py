"""`ibstat` and `ibstatus` pasted into `check --from` (gpudoctor/paste/ibstat.py): real published outputs
(tests/fixtures/pastes/ibstat, sources in SOURCES.md) read into `system.infiniband` as the live node reads
sysfs, and the NICs NCCL would use picked from them as on a live node (nics.nccl_nics)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from helpers.common import PASTES

from gpudoctor import paste
from gpudoctor.judging import nics

IBSTAT = PASTES / "ibstat"

# fixture -> {(state, rate, link layer): ports}, and the NICs NCCL would use (count, Gb/s each)
EXPECTED = {
    "ibstat-8x-cx7-ndr-400-ib-plus-4-cx6dx-eth-2-down-hgx-8gpu.txt": (
        {
            ("4: ACTIVE", "400 Gb/sec", "InfiniBand"): 8,
            ("1: DOWN", "40 Gb/sec", "Ethernet"): 2,
            ("4: ACTIVE", "100 Gb/sec", "Ethernet"): 2,
        },
        (8, 400),
    ),
    "ibstat-8x-cx7-400-roce-plus-4-cx6dx-100-roce-h100.txt": (
        {("4: ACTIVE", "400 Gb/sec", "Ethernet"): 8, ("4: ACTIVE", "100 Gb/sec", "Ethernet"): 4},
        (8, 400),
    ),
    "ibstat-8x-cx7-400-roce-2-down-disabled-plus-4-cx6dx-100-h100.txt": (
        {
            ("4: ACTIVE", "400 Gb/sec", "Ethernet"): 6,
            ("4: ACTIVE", "100 Gb/sec", "Ethernet"): 4,
            ("1: DOWN", "40 Gb/sec", "Ethernet"): 2,
        },
        (6, 400),
    ),
    "ibstat-8x-cx7-ndr-400-ib-plus-bf3-bond-200-eth-h100.txt": (
        {("4: ACTIVE", "400 Gb/sec", "InfiniBand"): 8, ("4: ACTIVE", "200 Gb/sec", "Ethernet"): 1},
        (8, 400),
    ),
    "ibstat-b300-11-hca-7-cx8-down-disabled-4-cx7-ib-100.txt": (
        {("1: DOWN", "10 Gb/sec", "InfiniBand"): 7, ("4: ACTIVE", "100 Gb/sec", "InfiniBand"): 4},
        (4, 100),
    ),
    "ibstat-8x-cx6-vf-hdr-200-azure-a100-then-ibpanic.txt": (
        {("4: ACTIVE", "200 Gb/sec", "InfiniBand"): 8},
        (8, 200),
    ),
    "ibstatus-9-dev-8-hdr-200-ib-plus-1-eth-40-unknown-gid-azure-a100.txt": (
        {("4: ACTIVE", "200 Gb/sec (4X HDR)", "InfiniBand"): 8, ("4: ACTIVE", "40 Gb/sec (4X QDR)", "Ethernet"): 1},
        (8, 200),
    ),
    "ibstatus-9-dev-8-2x-ndr-200-ib-plus-1-roce-25-pci-names-h20.txt": (
        {("4: ACTIVE", "200 Gb/sec (2X NDR)", "InfiniBand"): 8, ("4: ACTIVE", "25 Gb/sec (1X EDR)", "Ethernet"): 1},
        (8, 200),
    ),
}


def ports_of(text: str) -> list[dict]:
    return paste.read(text).facts["system"].get("infiniband") or []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_port_is_read_as_sysfs_gives_it_and_nccls_nics_are_picked(name: str) -> None:
    ports = ports_of((IBSTAT / name).read_text())
    states, (count, gbits) = EXPECTED[name]
    assert Counter((p["state"], p["rate"], p["link_layer"]) for p in ports) == states
    assert all(set(p) == {"device", "port", "state", "rate", "link_layer", "numa_node"} for p in ports)
    used, left = nics.nccl_nics(ports, set(), {})
    assert [nics.port_gbits(p) for p in used] == [gbits] * count, left
    assert len(used) + len(left) == len(ports)


def test_the_fixtures_are_all_listed() -> None:
    assert sorted(p.name for p in IBSTAT.glob("*.txt")) == sorted(EXPECTED)


def test_ibstat_and_ibstatus_of_one_node_in_one_paste_count_each_port_once() -> None:
    text = "".join((IBSTAT / n).read_text() + "\n" for n in EXPECTED if "azure-a100" in n)
    ports = ports_of(text)
    assert len(ports) == 9 and len({(p["device"], p["port"]) for p in ports}) == 9


def test_a_markdown_paste_without_indentation_and_with_blank_lines_is_read() -> None:
    # As a documentation page renders ibstat (each key its own paragraph), written from ibstat.c's format.
    text = "\n\n".join(["$ ibstat", "CA 'mlx5_0'", "CA type: MT4123", "Port 1:", "State: Active", "Rate: 200"])
    text += "\n\nLink layer: InfiniBand\n"
    assert ports_of(text) == [
        {
            "device": "mlx5_0",
            "port": 1,
            "state": "4: ACTIVE",
            "rate": "200 Gb/sec",
            "link_layer": "InfiniBand",
            "numa_node": None,
        }
    ]


def test_ibstats_newer_effective_speed_line_keeps_the_port_whole() -> None:
    """rdma-core's master prints "Effective speed: %g" after Rate (infiniband-diags/ibstat.c, commit 9a645e432):
    a published output with that line inserted, as the next release will print it."""
    real = (IBSTAT / "ibstat-8x-cx7-ndr-400-ib-plus-bf3-bond-200-eth-h100.txt").read_text()
    newer = re.sub(r"^(\s+)Rate: 400$", r"\1Rate: 400\n\1Effective speed: 400", real, flags=re.M)
    assert newer != real
    assert ports_of(newer) == ports_of(real)


def test_key_value_lines_outside_an_ibstat_block_are_not_ports() -> None:
    text = "Port 1:\nState: Active\nRate: 400\nLink layer: InfiniBand\nCA 'mlx5_0'\nsomething else: 1\nState: Down\n"
    assert ports_of(text) == []


def test_the_live_infiniband_judge_reads_a_pasted_port_down() -> None:
    from gpudoctor.checks.system import judge_infiniband

    ports = ports_of((IBSTAT / "ibstat-b300-11-hca-7-cx8-down-disabled-4-cx7-ib-100.txt").read_text())
    result = judge_infiniband({"infiniband": ports})
    assert result.status.value == "warn" and result.summary.startswith("7 of 11 ports not active")
