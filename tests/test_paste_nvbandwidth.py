"""The nvbandwidth reader over real published outputs (tests/fixtures/benchmarks/nvbandwidth, sources in
SOURCES.md): the header, the devices, every testcase with its matrix and sum, the machine facts, the JSON form,
a run amid other text, and bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES, read_alone, read_amid
from helpers.growth import LINEAR, K, growth

from gpudoctor.paste import nvbandwidth
from gpudoctor.paste.found import Found

NVB = FIXTURES / "benchmarks" / "nvbandwidth"
OTHER_KINDS = [p for p in (FIXTURES / "pastes").iterdir() if p.is_dir()] + [
    FIXTURES / "benchmarks" / kind for kind in ("nccl-tests", "topo", "dcgmi")
]


def found_in(text: str) -> Found:
    return read_alone(nvbandwidth.read, text)


def fixture(name: str) -> Found:
    return found_in((NVB / name).read_text(encoding="utf-8"))


def section(found: Found) -> dict[str, Any]:
    return found.facts["benchmarks"]["nvbandwidth"]


def brief(testcase: dict[str, Any]) -> tuple[Any, ...]:
    """A testcase as (name, line, status, unit, rows, columns, sum)."""
    t = testcase
    return t["name"], t["line"], t["status"], t["unit"], len(t["rows"]), len(t["columns"]), t["sum"]


A10 = "NVIDIA A10"
H20 = "NVIDIA H20-3e"
A100_80 = "NVIDIA A100-SXM4-80GB"
RTX4090 = "NVIDIA GeForce RTX 4090"
H2D, D2H = "host_to_device_memcpy_ce", "device_to_host_memcpy_ce"
# file: ((line, format, version, cuda_runtime, driver_version), devices, testcases, {(testcase, row, column): cell})
Expected = tuple[tuple[Any, ...], list[tuple[Any, ...]], list[tuple[Any, ...]], dict[tuple[int, int, int], Any]]
EXPECTED: dict[str, Expected] = {
    "a10-1gpu-h2d-ce-and-sm-v0.5-two-runs.txt": (
        (3, "text", "v0.5", "12040", "550.54.15"),
        [(0, A10, None)],
        [(H2D, 15, "Passed", "GB/s", 1, 1, 25.17), ("host_to_device_memcpy_sm", 37, "Passed", "GB/s", 1, 1, 25.25)],
        {(0, 0, 0): 25.17, (1, 0, 0): 25.25},
    ),
    "a100-sxm4-40gb-1gpu-h2d-sm.txt": (
        (2, "text", "v0.8", "12060", "560.35.05"),
        [(0, "NVIDIA A100-SXM4-40GB", "00000000:99:00")],
        [("host_to_device_memcpy_sm", 11, "Passed", "GB/s", 1, 1, 25.13)],
        {(0, 0, 0): 25.13},
    ),
    # Running, then an ASSERT: the testcase started and printed no matrix
    "a100-sxm4-80gb-8gpu-d2d-read-ce-v0.7-assert.txt": (
        (1, "text", "v0.7", "12040", "550.127.08"),
        [(i, A100_80, f"00000000:{bus}:00") for i, bus in enumerate(("34", "35", "36", "37", "9b", "9c", "9d", "9e"))],
        [("device_to_device_memcpy_read_ce", 17, None, None, 0, 0, None)],
        {},
    ),
    # no header kept; the last matrix lost its SUM line to the publisher's [...]
    "gb300-dgx-station-h2d-d2h-c2c-trimmed.txt": (
        (3, "text", None, None, None),
        [],
        [
            (H2D, 3, "Passed", "GB/s", 1, 1, 359.05),
            (D2H, 10, "Passed", "GB/s", 1, 1, 377.15),
            ("host_to_device_bidirectional_memcpy_ce", 17, "Passed", "GB/s", 1, 1, 175.38),
            ("device_to_host_bidirectional_memcpy_ce", 24, "Passed", "GB/s", 1, 1, None),
        ],
        {(0, 0, 0): 359.05, (3, 0, 0): 171.76},
    ),
    # "> Running": the reporter quoted the Running lines; no SUM lines
    "h100-8gpu-h2d-d2h-sm-partial.txt": (
        (1, "text", None, None, None),
        [],
        [
            ("host_to_device_memcpy_sm", 1, "Passed", "GB/s", 1, 8, None),
            ("device_to_host_memcpy_sm", 6, "Passed", "GB/s", 1, 8, None),
        ],
        {(0, 0, 0): 35.19, (0, 0, 7): 35.06, (1, 0, 3): 52.78},
    ),
    "h20-3e-8gpu-device-local-copy.txt": (
        (2, "text", "v0.8", "12060", "550.127.08"),
        [(i, H20, f"00000000:{bus}:00") for i, bus in enumerate(("18", "38", "49", "59", "9b", "bb", "ca", "da"))],
        [("device_local_copy", 19, "Passed", "GB/s", 1, 8, 8930.99)],
        {(0, 0, 0): 1116.30, (0, 0, 6): 1117.17},
    ),
    # before v0.5: no bus ids, rows without the leading blank
    "rtx4090-8gpu-h2d-d2h-v0.2-trimmed.txt": (
        (2, "text", "v0.2", "12030", "545.29.06"),
        [(i, RTX4090, None) for i in range(8)],
        [(H2D, 21, "Passed", "GB/s", 1, 8, 205.04), (D2H, 28, "Passed", "GB/s", 1, 8, 214.28)],
        {(0, 0, 2): 23.90, (1, 0, 7): 26.83},
    ),
    # no Running line (the reporter's "..."); N/A on the diagonal
    "rtxa6000-6gpu-pcie-p2p-read-ce-elided.txt": (
        (1, "text", "v0.8", "13000", "580.95.05"),
        [],
        [("device_to_device_memcpy_read_ce", 10, "Passed", "GB/s", 6, 6, 715.53)],
        {(0, 0, 0): None, (0, 0, 1): 26.34, (0, 3, 0): 21.82, (0, 5, 5): None, (0, 2, 3): 22.36},
    ),
}
JSON_FIXTURE = "unknown-1gpu-pcie-json-dcgm-test-input.json"
# file: nvml facts the paste states
MACHINE: dict[str, dict[str, Any]] = {
    "a10-1gpu-h2d-ce-and-sm-v0.5-two-runs.txt": {
        "driver_version": "550.54.15",
        "cuda_driver_version": 12040,
        "gpus": [{"index": 0, "name": A10}],
    },
    "a100-sxm4-40gb-1gpu-h2d-sm.txt": {
        "driver_version": "560.35.05",
        "cuda_driver_version": 12060,
        "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "pci_bus_id": "00000000:99:00.0"}],
    },
    "a100-sxm4-80gb-8gpu-d2d-read-ce-v0.7-assert.txt": {
        "driver_version": "550.127.08",
        "cuda_driver_version": 12040,
        "gpus": [
            {"index": i, "name": A100_80, "pci_bus_id": f"00000000:{bus}:00.0"}
            for i, bus in enumerate(("34", "35", "36", "37", "9B", "9C", "9D", "9E"))
        ],
    },
    "gb300-dgx-station-h2d-d2h-c2c-trimmed.txt": {},
    "h100-8gpu-h2d-d2h-sm-partial.txt": {},
    "h20-3e-8gpu-device-local-copy.txt": {
        "driver_version": "550.127.08",
        "cuda_driver_version": 12060,
        "gpus": [
            {"index": i, "name": H20, "pci_bus_id": f"00000000:{bus}:00.0"}
            for i, bus in enumerate(("18", "38", "49", "59", "9B", "BB", "CA", "DA"))
        ],
    },
    "rtx4090-8gpu-h2d-d2h-v0.2-trimmed.txt": {
        "driver_version": "545.29.06",
        "cuda_driver_version": 12030,
        "gpus": [{"index": i, "name": RTX4090} for i in range(8)],
    },
    "rtxa6000-6gpu-pcie-p2p-read-ce-elided.txt": {"driver_version": "580.95.05", "cuda_driver_version": 13000},
    JSON_FIXTURE: {"driver_version": "565.02"},
}


def test_every_nvbandwidth_fixture_is_expected() -> None:
    names = {p.name for p in NVB.iterdir() if not p.name.startswith("LICENSE")}
    assert names == set(EXPECTED) | {JSON_FIXTURE}
    assert set(MACHINE) == names


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_text_fixture_gives_its_header_devices_testcases_and_cells(name: str) -> None:
    header, devices, testcases, cells = EXPECTED[name]
    got = section(fixture(name))
    assert (got["line"], got["format"], got["version"], got["cuda_runtime"], got["driver_version"]) == header
    assert [(d["index"], d["name"], d["bus_id"]) for d in got["devices"]] == devices
    assert [brief(t) for t in got["testcases"]] == testcases
    for (case, row, column), value in cells.items():
        assert got["testcases"][case]["matrix"][row][column] == value, (case, row, column)
    for t in got["testcases"]:
        assert len(t["matrix"]) == len(t["rows"]) and all(len(r) == len(t["columns"]) for r in t["matrix"])


@pytest.mark.parametrize("name", sorted(MACHINE))
def test_every_fixture_states_its_machine_facts(name: str) -> None:
    found = fixture(name)
    assert found.facts["nvml"] == MACHINE[name]
    assert set(found.facts) == {"nvml", "torch", "system", "benchmarks"}
    assert found.kinds[nvbandwidth.READER] >= 1 and not found.conflicts


def test_each_fact_says_the_line_it_came_from() -> None:
    found = fixture("h20-3e-8gpu-device-local-copy.txt")
    assert found.origins["nvml.driver_version"].text == "Driver Version: 550.127.08"
    assert found.origins["nvml.cuda_driver_version"].line == 6
    assert found.origins["nvml.gpus.7.pci_bus_id"].text == "Device 7: NVIDIA H20-3e (00000000:da:00)"
    assert found.origins["benchmarks.nvbandwidth"].text == "nvbandwidth Version: v0.8"


def test_the_json_form_gives_every_testcase_waived_ones_and_latency_included() -> None:
    got = section(fixture(JSON_FIXTURE))
    assert (got["line"], got["format"], got["version"], got["cuda_runtime"]) == (1, "json", "v0.5", "12070")
    cases = got["testcases"]
    assert len(cases) == 32
    assert [brief(t) for t in cases[:5]] == [
        (H2D, 20, "Passed", "GB/s", 1, 1, 12.396361291250001),
        (D2H, 35, "Passed", "GB/s", 1, 1, 13.200093726),
        ("host_to_device_bidirectional_memcpy_ce", 50, "Passed", "GB/s", 1, 1, 11.503123744750001),
        ("device_to_host_bidirectional_memcpy_ce", 65, "Passed", "GB/s", 1, 1, 11.32898976375),
        ("device_to_device_memcpy_read_ce", 70, "Waived", None, 0, 0, None),
    ]
    assert cases[0]["matrix"] == [[12.3964]]
    assert sum(t["status"] == "Waived" for t in cases) == 17
    latency = next(t for t in cases if t["name"] == "host_device_latency_sm")
    assert (latency["unit"], latency["matrix"], latency["sum"]) == ("ns", [[649.879]], 649.8785803834809)


def test_json_inside_other_text_is_read_and_a_broken_one_is_not() -> None:
    body = (NVB / JSON_FIXTURE).read_text()
    found = found_in("$ ./nvbandwidth -j > out.json\nhere it is:\n" + body + "\nthat was all\n")
    assert section(found)["line"] == 3 and len(section(found)["testcases"]) == 32
    assert found_in(body[: len(body) // 2]).kinds == {}


def test_a_mixed_machine_gives_devices_but_no_gpu_facts() -> None:
    """Written from output.cpp's device lines: CUDA numbers a mixed machine's GPUs fastest first, which need not
    be nvidia-smi's order, so its devices are not recorded as the machine's GPUs."""
    lines = [
        "nvbandwidth Version: v0.8",
        "Device 0: NVIDIA GeForce RTX 4090 (00000000:41:00)",
        "Device 1: NVIDIA GeForce RTX 3090 (00000000:01:00)",
    ]
    found = found_in("\n".join(lines))
    assert [d["name"] for d in section(found)["devices"]] == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]
    assert found.facts["nvml"] == {}


def test_bidirectional_testcases_give_each_matrix_under_its_sum_key() -> None:
    """Written from inline_common.h (the matrix and SUM line) and testcases_ce.cpp (DeviceToDeviceBidirReadCE
    prints Read1, Read2 and Total under key_read1, key_read2, key_total); no such published output was found."""
    key = "device_to_device_bidirectional_memcpy_read_ce"
    lines = [f"Running {key}."]
    for part, total in (("Read1", 10.0), ("Read2", 11.0), ("Total", 21.0)):
        lines += [f"memcpy CE GPU(row) <-> GPU(column) {part} bandwidth (GB/s)", "           0         1"]
        lines += [f" 0       N/A    {total / 2:6.2f}", f" 1    {total / 2:6.2f}       N/A", ""]
        lines += [f"SUM {key}_{part.lower()} {total:.2f}", ""]
    got = section(found_in("\n".join(lines)))["testcases"]
    assert [brief(t) for t in got] == [
        (f"{key}_read1", 1, "Passed", "GB/s", 2, 2, 10.0),
        (f"{key}_read2", 9, "Passed", "GB/s", 2, 2, 11.0),
        (f"{key}_total", 16, "Passed", "GB/s", 2, 2, 21.0),
    ]
    assert got[2]["matrix"] == [[None, 10.5], [10.5, None]]


def test_json_stacks_a_bidirectional_testcases_three_matrices_and_they_are_split() -> None:
    """Written from json_output.cpp addTestcaseResults: each call appends its rows to the testcase's one
    bandwidth_matrix and overwrites its sum and description, so 2 GPUs give 6 rows of 2."""
    rows = [["N/A", "1"], ["2", "N/A"], ["N/A", "3"], ["4", "N/A"], ["N/A", "5"], ["6", "N/A"]]
    case = {"name": "device_to_device_bidirectional_memcpy_write_ce", "status": "Passed", "sum": 11.0}
    case |= {"bandwidth_description": "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)"}
    body = json.dumps({"nvbandwidth": {"version": "v0.8", "testcases": [case | {"bandwidth_matrix": rows}]}}, indent=4)
    got = section(found_in(body))["testcases"]
    assert [(t["name"], t["matrix"], t["sum"]) for t in got] == [
        ("device_to_device_bidirectional_memcpy_write_ce_write1", [[None, 1.0], [2.0, None]], None),
        ("device_to_device_bidirectional_memcpy_write_ce_write2", [[None, 3.0], [4.0, None]], None),
        ("device_to_device_bidirectional_memcpy_write_ce_total", [[None, 5.0], [6.0, None]], 11.0),
    ]


def test_statuses_of_failed_and_waived_testcases() -> None:
    """Written from nvbandwidth.cpp: v0.8's runTestcase prints "Error: " and the message after "Running x.";
    v0.4's (67daa2d) printed "Waiving x."; v0.5+ print "Waived: " without the key, which names nothing."""
    lines = [
        "nvbandwidth Version: v0.8",
        "Running device_to_device_memcpy_write_ce.",
        "Error: cuMemcpyAsync failed",
        "Waived: ",
        "Waiving device_to_device_memcpy_read_sm.",
        "Running host_to_device_memcpy_ce.",
    ]
    got = section(found_in("\n".join(lines)))["testcases"]
    assert [brief(t)[:3] for t in got] == [
        ("device_to_device_memcpy_write_ce", 2, "Error"),
        ("device_to_device_memcpy_read_sm", 5, "Waived"),
        ("host_to_device_memcpy_ce", 6, None),
    ]


def test_v0_10_headers_and_coefficient_lines_are_read() -> None:
    """Written from v0.10.0 outputs published as "CUDA Runtime Version: 13.3 (13030)" and "CUDA Driver Version
    (API): 13.3 (13030)" with a COEFFICIENT_OF_VARIATION line after the SUM (seen in the search index; their
    repositories could not be named, and nvbandwidth's sources stored here stop at v0.8)."""
    lines = [
        "nvbandwidth Version: v0.10.0",
        "CUDA Runtime Version: 13.3 (13030)",
        "CUDA Driver Version (API): 13.3 (13030)",
        "Driver Version: 610.57.04",
        "",
        f"Running {H2D}.",
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
        "           0         1",
        " 0     55.59     55.60",
        "",
        f"SUM {H2D} 111.19",
        f"COEFFICIENT_OF_VARIATION {H2D} 0.00",
    ]
    found = found_in("\n".join(lines))
    assert section(found)["cuda_runtime"] == "13.3 (13030)"
    assert found.facts["nvml"] == {"cuda_driver_version": 13030, "driver_version": "610.57.04"}
    assert [brief(t) for t in section(found)["testcases"]] == [(H2D, 6, "Passed", "GB/s", 1, 2, 111.19)]


SUM_LINE = "SUM device_to_device_memcpy_read_ce 715.53"  # rtxa6000-6gpu-pcie-p2p-read-ce-elided.txt


@pytest.mark.parametrize("kind", OTHER_KINDS, ids=lambda p: p.name)
def test_other_kinds_of_paste_give_the_nvbandwidth_reader_nothing_of_their_own(kind: Path) -> None:
    for path in sorted(p for p in kind.rglob("*") if p.suffix in (".txt", ".json", ".log")):
        found = read_amid(path.read_text(encoding="utf-8", errors="replace"), SUM_LINE, nvbandwidth.read)
        assert found.kinds == {nvbandwidth.READER: 1}, path.name
        got = section(found)
        assert [brief(t) for t in got["testcases"]] == [
            ("device_to_device_memcpy_read_ce", got["line"], "Passed", None, 0, 0, 715.53)
        ]
        assert found.facts["nvml"] == {} and got["devices"] == [] and got["version"] is None, path.name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nvbandwidth",
        "Device 0: NVIDIA A100",  # deviceQuery and bandwidthTest print devices too: only after nvbandwidth's header
        "CUDA Driver Version: 12040",
        "Driver Version: 550.54.15",
        "Running the tests.",
        "Running tests.",
        "Running host_to_device_memcpy_ce",
        "SUM of all parts 3",
        "SUM host_to_device_memcpy_ce",
        "SUM host_to_device_memcpy_ce twelve",
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n           0\n",
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n           0         1\n 0     25.17\n",
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n           0\n 0     fast\n",
        "memcpy is slow here\nwe tried 3 times\n",
        '{\n"nvbandwidth": "v0.8"\n}',
        '{\n"nvbandwidth": {"testcases": [1, {"name": 2}, {"name": "x", "bandwidth_matrix": "N/A"}]}',
        '{\n"nvbandwidth": {"testcases": 5, "GPU Device list": {"0": "A"}}\n}',
    ],
)
def test_truncated_and_lookalike_lines_give_nothing(text: str) -> None:
    assert found_in(text).kinds == {}


def test_odd_json_values_are_read_without_error() -> None:
    case = {"name": "x_y", "status": 3, "bandwidth_matrix": [["N/A", 1e400, "nan", True, None], "row"], "sum": "9"}
    body = {"nvbandwidth": {"version": 8, "Driver Version": ["550"], "GPU Device list": [5, "zero: A"]}}
    body["nvbandwidth"]["testcases"] = [case]
    got = section(found_in(json.dumps(body, indent=4)))
    assert (got["version"], got["driver_version"], got["devices"]) == (None, None, [])
    assert [(t["name"], t["status"], t["matrix"], t["sum"]) for t in got["testcases"]] == [
        ("x_y", None, [[None, None, None, None, None]], None)
    ]


def test_binary_junk_is_read_without_error_and_gives_nothing() -> None:
    rng = random.Random(31)
    junk = bytes(rng.randrange(256) for _ in range(200_000)).decode("latin-1")
    assert found_in(junk).kinds == {}
    mixed = junk + "\n" + (NVB / "h20-3e-8gpu-device-local-copy.txt").read_text() + "\n" + junk
    assert section(found_in(mixed))["testcases"][0]["sum"] == 8930.99


def hostile(size: int) -> str:
    """Lines of `size` characters, a matrix `size / 2` columns wide and one `0.3 * size` rows tall."""
    title = "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
    wide = title + " 0" * (size // 2) + "\n" + "0 " + "1.0 " * (size // 2)
    tall = title + " 0\n" + "0 1.0\n" * (size * 3 // 10)
    lines = ["Running " + "a" * size + ".", "SUM " + "a_" * (size // 2) + " 1", ">" * size, wide, tall]
    return "\n".join(lines)


def test_long_hostile_lines_and_huge_matrices_are_read_in_linear_time() -> None:
    """K times the size is about K times the work (tests/helpers/growth.py, up to a quarter of the size read); the
    matrix is capped."""
    grew = growth(found_in, hostile(250_000 // K), hostile(250_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the size"
    found = found_in(hostile(1_000_000))
    kept = section(found)["testcases"]
    assert [len(t["rows"]) for t in kept if t["rows"]] == [nvbandwidth.MAX_CELLS]
