"""The `dcgmi diag` reader over real published outputs (tests/fixtures/benchmarks/dcgmi, sources in SOURCES.md):
each box's metadata, tests, results per GPU, messages joined whole and the figures they state, the JSON of
DCGM 1.7 and 4.x, a result amid other text, and bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES, read_alone, read_amid
from helpers.growth import LINEAR, K, growth

from gpudoctor.paste import dcgm_diag
from gpudoctor.paste.found import Found

DCGMI = FIXTURES / "benchmarks" / "dcgmi"
OTHER_KINDS = [p for p in (FIXTURES / "pastes").iterdir() if p.is_dir()] + [
    FIXTURES / "benchmarks" / kind for kind in ("nccl-tests", "topo", "nvbandwidth")
]


def found_in(text: str) -> Found:
    return read_alone(dcgm_diag.read, text)


def fixture(name: str) -> Found:
    return found_in((DCGMI / name).read_text(encoding="utf-8"))


def section(found: Found) -> dict[str, Any]:
    return found.facts["benchmarks"]["dcgm_diag"]


def brief(test: dict[str, Any]) -> tuple[Any, ...]:
    """A test as (name, category, result, per-GPU results)."""
    return test["name"], test["category"], test["result"], test["gpus"]


def every(count: int, result: str = "pass") -> dict[str, str]:
    return {str(i): result for i in range(count)}


DEPLOYMENT_3X = [
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS Blocks",
    "Persistence Mode",
    "Environment Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
]
INTERNAL = "There was an internal error during the test: "
RERUN = "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
UNPARSED = "'Output of child process ({}) couldn't be parsed: '* Line 1, Column 1   Syntax error: value, object or "
UNPARSED += "array expected. '' "
# file: ((line, format, version, driver_version), GPU indices, tests, {test: messages})
EXPECTED: dict[str, tuple[tuple[Any, ...], list[int], list[tuple[Any, ...]], dict[int, list[str]]]] = {
    # DCGM 4.x: per-GPU rows; pcie fails on its own global warnings while every GPU passed
    "l40s-4gpu-diag-r2-v4.2.3-pcie-internal-error.txt": (
        (4, "text", "4.2.3", "570.148.08"),
        [0, 1, 2, 3],
        [
            ("software", "Deployment", "pass", every(4)),
            ("memory", "Hardware", "pass", every(4)),
            ("pcie", "Integration", "fail", every(4)),
        ],
        {
            2: [
                f"{INTERNAL}'A child process (152) exited with non-zero status 1' {RERUN}",
                f"{INTERNAL}'A child process (153) exited with non-zero status 1' {RERUN}",
                INTERNAL + UNPARSED.format(152) + RERUN,
                INTERNAL + UNPARSED.format(153) + RERUN,
            ]
        },
    ),
    "b200-8gpu-diag-r2-v4.4.1-pcie-internal-error.txt": (
        (2, "text", "4.4.1", "570.172.08"),
        list(range(8)),
        [
            ("software", "Deployment", "pass", every(8)),
            ("memory", "Hardware", "pass", every(8)),
            ("pcie", "Integration", "fail", every(8)),
        ],
        {2: [INTERNAL + UNPARSED.format(11167) + RERUN]},
    ),
    "a10g-1gpu-diag-r2-v4.4.2-all-pass.txt": (
        (4, "text", "4.4.2", "580.105.08"),
        [0],
        [
            ("software", "Deployment", "pass", every(1)),
            ("memory", "Hardware", "pass", every(1)),
            ("pcie", "Integration", "pass", every(1)),
        ],
        {},
    ),
    # DCGM 3.x: "Pass - All", no GPU named
    "h200-8gpu-diag-r3-v3.3.9-all-pass.txt": (
        (3, "text", "3.3.9", "570.133.20"),
        [],
        [(name, "Deployment", "pass", {}) for name in DEPLOYMENT_3X]
        + [
            ("PCIe", "Integration", "pass", {}),
            ("GPU Memory", "Hardware", "pass", {}),
            ("Diagnostic", "Hardware", "pass", {}),
            ("Targeted Stress", "Stress", "pass", {}),
            ("Targeted Power", "Stress", "pass", {}),
            ("Memory Bandwidth", "Stress", "pass", {}),
            ("EUD Test", "Stress", "skip", {}),
        ],
        {},
    ),
    # the author's excerpt: rows only, the last one cut ("ts." with no closing bar)
    "8gpu-diag-r2-v3-gpu-memory-thermal-fail-excerpt.txt": (
        (1, "text", None, None),
        list(range(8)),
        [("GPU Memory", None, "fail", {"0": "fail"} | {str(i): "pass" for i in range(1, 8)})],
        {
            0: [
                "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 "
                "Verify that the cooling on this machine is functional, including external, thermal material "
                "interface, fans, and any other components."
            ]
        },
    ),
    # the author cut the test's row: its message is kept under no name
    "deployment-row-remap-pending-error-excerpt.txt": (
        (2, "text", None, None),
        [],
        [(None, "Deployment", None, {})],
        {0: ["GPU 3 has uncorrectable memory errors and row remappings are pending"]},
    ),
    # mid-table: two Info messages of a test whose row the excerpt starts after, then GPU Memory
    "t4-2gpu-diag-r2-v3.3.1-gpu0-busy-excerpt.txt": (
        (1, "text", None, None),
        [0, 1],
        [(None, None, None, {}), ("GPU Memory", "Hardware", "fail", {"0": "fail", "1": "pass"})],
        {
            0: [
                "GPU 0 API call cudaStreamCreate failed: 'CUDA-capable device(s) is/are busy or unavailable' " + RERUN,
                "GPU 1 GPU to Host bandwidth:  12.33 GB/s, GPU 1 Host to GPU bandwidth:  13.15 GB/s, "
                "GPU 1 bidirectional bandwidth: 22.63 GB/s",
            ],
            1: [
                "GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. Restart "
                "DCGM. Rerun diagnostics. Unable to create CUDA context: 'CUDA-capable device(s) is/are busy or "
                "unavailable'."
            ],
        },
    ),
}
JSON_17 = "16gb-pcie-gen3-4gpu-diag-json-v1.7-dcgm-test-string.json"
SCHEMA = "dcgm-diag-json-schema-4.x.json"


def test_every_dcgmi_fixture_is_expected() -> None:
    names = {p.name for p in DCGMI.iterdir() if not p.name.startswith("LICENSE")}
    assert names == set(EXPECTED) | {JSON_17, SCHEMA}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_text_fixture_gives_its_metadata_tests_results_and_messages(name: str) -> None:
    header, gpus, tests, messages = EXPECTED[name]
    found = fixture(name)
    got = section(found)
    assert (got["line"], got["format"], got["version"], got["driver_version"]) == header
    assert got["gpus"] == [{"index": i, "name": None, "bus_id": None} for i in gpus]
    assert [brief(t) for t in got["tests"]] == tests
    assert {i: t["messages"] for i, t in enumerate(got["tests"]) if t["messages"]} == messages
    driver = {"driver_version": header[3]} if header[3] else {}
    assert found.facts["nvml"] == driver and set(found.facts) == {"nvml", "torch", "system", "benchmarks"}


def test_figures_a_message_states_are_read_with_their_gpu() -> None:
    tests = section(fixture("t4-2gpu-diag-r2-v3.3.1-gpu0-busy-excerpt.txt"))["tests"]
    assert tests[0]["figures"] == [
        {"gpu": 1, "name": "d2h", "value": 12.33, "unit": "GB/s"},
        {"gpu": 1, "name": "h2d", "value": 13.15, "unit": "GB/s"},
        {"gpu": 1, "name": "bidir", "value": 22.63, "unit": "GB/s"},
    ]
    assert tests[1]["figures"] == []


def test_each_fact_says_the_line_it_came_from() -> None:
    found = fixture("l40s-4gpu-diag-r2-v4.2.3-pcie-internal-error.txt")
    assert found.origins["nvml.driver_version"].line == 8
    assert found.origins["benchmarks.dcgm_diag"].text.startswith("| Diagnostic")


def test_dcgm_1_7_json_gives_tests_per_gpu_results_messages_and_figures() -> None:
    got = section(fixture(JSON_17))
    assert (got["line"], got["format"], got["version"], got["driver_version"]) == (1, "json", "1.7", None)
    assert [g["index"] for g in got["gpus"]] == [0, 1, 2, 3]
    tests = {t["name"]: t for t in got["tests"]}
    assert len(got["tests"]) == 17 and all(t["category"] == "Deployment" for t in got["tests"][:10])
    assert brief(tests["memory"]) == (
        "memory",
        "Hardware",
        "pass",
        {"0": "skip", "1": "pass", "2": "pass", "3": "pass"},
    )
    assert tests["memory"]["messages"][0].startswith("ECC memory on GPU 0 is not currently active.")
    assert brief(tests["sm_stress"])[2:] == ("fail", {"0": "fail", "1": "pass", "2": "fail", "3": "fail"})
    assert tests["sm_stress"]["figures"] == [
        {"gpu": 0, "name": "flops", "value": 2128.7, "unit": "GFLOPS"},
        {"gpu": 2, "name": "flops", "value": 1096.5, "unit": "GFLOPS"},
        {"gpu": 3, "name": "flops", "value": 1099.7, "unit": "GFLOPS"},
    ]
    pcie = tests["pcie"]["figures"]
    assert len(pcie) == 12 and pcie[:3] == [
        {"gpu": 0, "name": "d2h", "value": 13.08, "unit": "GB/s"},
        {"gpu": 0, "name": "h2d", "value": 12.13, "unit": "GB/s"},
        {"gpu": 0, "name": "bidir", "value": 22.42, "unit": "GB/s"},
    ]
    assert brief(tests["targeted_power"])[2:] == ("skip", every(4, "skip"))


def test_a_json_schema_is_not_an_output() -> None:
    assert fixture(SCHEMA).kinds == {}


def dcgm4_json() -> str:
    """Written from dcgmi/Diag.cpp HelperJsonBuildOutput (4.x) and testing/python3/dcgm_diag_schema.json: jsoncpp's
    styled output, keys sorted; a result per GPU entity, the test's summary repeating every error, info messages
    as AddInfoVerboseForGpu records them (without the GPU, which the entity gives). No real 4.x -j output was
    found published; the figures' texts are DCGM's own formats (dcgm_errors.h, PcieMain.cpp)."""
    gpu = {"entity_group": "GPU", "entity_group_id": 1}
    slow = "GPU 1 only achieved a memory bandwidth of 1234.56 GB/s, failing to meet 3000.00 GB/s for test 0"
    warning = {"error_category": 3, "error_id": 49, "error_severity": 2, "warning": slow}
    bandwidth = {
        "name": "memory_bandwidth",
        "results": [
            gpu | {"entity_id": 0, "status": "Pass"},
            gpu | {"entity_id": 1, "status": "Fail", "warnings": [warning]},
        ],
        "test_summary": {"status": "Fail", "warnings": [warning]},
    }
    info = ["GPU to Host bandwidth:\t\t25.17 GB/s", "Host to GPU bandwidth:\t\t24.90 GB/s"]
    pcie = {
        "name": "pcie",
        "results": [gpu | {"entity_id": 0, "status": "Pass", "info": info}, gpu | {"entity_id": 1, "status": "Skip"}],
        "test_summary": {"status": "Pass"},
    }
    body = {
        "DCGM Diagnostic": {
            "test_categories": [
                {"category": "Integration", "tests": [pcie]},
                {"category": "Stress", "tests": [bandwidth]},
            ]
        },
        "entity_groups": [
            {
                "entities": [{"device_id": "2330", "entity_id": i, "serial_num": f"165{i}"} for i in range(2)],
                "entity_group": "GPU",
                "entity_group_id": 1,
            }
        ],
        "metadata": {"Driver Version Detected": "550.90.07", "version": "4.0.0"},
    }
    return json.dumps(body, indent=3, sort_keys=True)


def test_dcgm_4_json_gives_summaries_entities_and_figures() -> None:
    found = found_in("$ dcgmi diag -r memory_bandwidth,pcie -j\n" + dcgm4_json() + "\n$ ")
    got = section(found)
    assert (got["line"], got["format"], got["version"], got["driver_version"]) == (2, "json", "4.0.0", "550.90.07")
    assert [g["index"] for g in got["gpus"]] == [0, 1]
    assert [brief(t) for t in got["tests"]] == [
        ("pcie", "Integration", "pass", {"0": "pass", "1": "skip"}),
        ("memory_bandwidth", "Stress", "fail", {"0": "pass", "1": "fail"}),
    ]
    assert got["tests"][0]["figures"] == [
        {"gpu": 0, "name": "d2h", "value": 25.17, "unit": "GB/s"},
        {"gpu": 0, "name": "h2d", "value": 24.9, "unit": "GB/s"},
    ]
    assert len(got["tests"][1]["messages"]) == 1  # the summary's copy of the warning is not kept twice
    assert got["tests"][1]["figures"] == [{"gpu": 1, "name": "memory_bandwidth", "value": 1234.56, "unit": "GB/s"}]
    assert found.facts["nvml"] == {"driver_version": "550.90.07"}


FIGURE_MESSAGES = [
    (
        "Bandwidth of GPU 2 in direction h2d of 3.10 did not exceed minimum required bandwidth of 10.00.",
        (2, "h2d", 3.1),
    ),
    ("GPU 5 calculated at approximately 21688.18 gigaflops during this test", (5, "flops", 21688.18)),
    ("Detected 900.50 GFLOPs for GPU 1 which is below the threshold 1000.00", (1, "flops", 900.5)),
    ("Max stress level of 2128.7 did not reach desired stress level of 3000.0 for GPU 0", (0, "flops", 2128.7)),
    (
        "GPU 7 only achieved a memory bandwidth of 812.40 MB/s, failing to meet 1000.00 MB/s",
        (7, "memory_bandwidth", 812.4),
    ),
]
UNITS = {"h2d": "GB/s", "flops": "GFLOPS", "memory_bandwidth": "MB/s"}


@pytest.mark.parametrize(("message", "expected"), FIGURE_MESSAGES)
def test_each_figure_format_dcgm_prints(message: str, expected: tuple[Any, ...]) -> None:
    """dcgm_errors.h's DCGM_FR_LOW_BANDWIDTH_MSG, DCGM_FR_GFLOPS_THRESHOLD_VIOLATION_MSG, DCGM_FR_STRESS_LEVEL_MSG,
    DCGM_FR_MEMORY_BANDWIDTH_MSG and DiagnosticPlugin.cpp's gigaflops info, filled in."""
    gpu, name, value = expected
    assert dcgm_diag.figures(message, None) == [{"gpu": gpu, "name": name, "value": value, "unit": UNITS[name]}]


def test_a_4x_message_about_one_gpu_takes_its_gpu_from_the_label() -> None:
    """Written from Diag.cpp HelperDisplayEntityResults: "Info: GPU1" labels a GPU's info, printed with -v."""
    bar = "+-----  Integration  -------+------------------------------------------------+"
    rows = [("pcie", "Pass"), ("", "GPU1: Pass"), ("Info: GPU1", "GPU to Host bandwidth:\t\t24.98 GB/s")]
    got = section(found_in("\n".join([bar, *(f"| {label:<25} | {value:<46} |" for label, value in rows)])))
    assert got["tests"][0]["figures"] == [{"gpu": 1, "name": "d2h", "value": 24.98, "unit": "GB/s"}]


RESULT_LINE = "| GPU Memory                | Pass - All                                     |"  # h200 fixture


@pytest.mark.parametrize("kind", OTHER_KINDS, ids=lambda p: p.name)
def test_other_kinds_of_paste_give_the_dcgm_reader_nothing_of_their_own(kind: Path) -> None:
    for path in sorted(p for p in kind.rglob("*") if p.suffix in (".txt", ".json", ".log")):
        found = read_amid(path.read_text(encoding="utf-8", errors="replace"), RESULT_LINE, dcgm_diag.read)
        assert found.kinds == {dcgm_diag.READER: 1}, path.name
        got = section(found)
        assert [brief(t) for t in got["tests"]] == [("GPU Memory", None, "pass", {})], path.name
        assert (got["version"], got["gpus"], found.facts["nvml"]) == (None, [], {}), path.name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "|",
        "| Diagnostic | Result |",
        "Successfully ran diagnostic for group.",
        "| memory                    | Pass                                           |",  # a 4.x row alone: any table
        "|                           | GPU0: Pass                                     |",
        "| Name | Pass - All |",  # not the box's widths
        "| Pass - All |",
        "+-----  Stress  ------------+------------------------------------------------+",
        '{\n"DCGM Diagnostic": []\n}',
        '{\n"DCGM GPU Diagnostic": {"test_categories": "none"}\n}',
        '{\n"DCGM Diagnostic": {"test_categories": 7}, "entity_groups": 3\n}',
    ],
)
def test_truncated_and_lookalike_lines_give_nothing(text: str) -> None:
    assert found_in(text).kinds == {}


def test_odd_json_values_are_read_without_error() -> None:
    results = [5, {"gpu_ids": 3, "status": "PASS", "warnings": ["plain", {"warnings": "3.x key"}, 7], "info": "one"}]
    results.append({"gpu_id": "4", "status": "Fail - GPU", "warnings": 9, "info": {"a": 1}})
    results.append({"entity_group": "CPU", "entity_id": 0, "status": None, "info": [None, "x"]})
    tests = [{"name": 9, "results": results, "test_summary": "Pass"}, "test"]
    body = {"DCGM GPU Diagnostic": {"test_categories": [{"category": 1, "tests": tests}, None]}, "version": 3}
    got = section(found_in(json.dumps(body, indent=4)))
    assert [brief(t) for t in got["tests"]] == [(None, None, "fail", {"3": "pass", "4": "fail"})]
    assert got["tests"][0]["messages"] == ["plain", "3.x key", "one", "x"]


def test_binary_junk_is_read_without_error_and_gives_nothing() -> None:
    rng = random.Random(37)
    junk = bytes(rng.randrange(256) for _ in range(200_000)).decode("latin-1")
    assert found_in(junk).kinds == {}
    mixed = junk + "\n" + (DCGMI / "a10g-1gpu-diag-r2-v4.4.2-all-pass.txt").read_text() + "\n" + junk
    assert [t["name"] for t in section(found_in(mixed))["tests"]] == ["software", "memory", "pcie"]


def flood(size: int) -> str:
    """At a `size` of 1,000,000: 5,000 tests, 100,000 lines of one message, and three lines of `size` characters."""
    head = "| Diagnostic                | Result                                         |"
    test = "| GPU Memory                | Pass - All                                     |"
    piece = "|                           | " + "x" * 45 + "  |"
    warning = "| Warning                   | " + "y" * 45 + "  |"
    lines = [head, *[test] * (size // 200), warning, *[piece] * (size // 10)]
    lines += ["|" * size, "| " + "z" * size + " |", ">" * size]
    return "\n".join(lines)


def test_floods_and_long_lines_are_capped_and_read_in_linear_time() -> None:
    """K times the flood is about K times the work (tests/helpers/growth.py, up to a quarter of the flood read)."""
    grew = growth(found_in, flood(250_000 // K), flood(250_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the flood"
    got = section(found_in(flood(1_000_000)))
    assert len(got["tests"]) == dcgm_diag.MAX_TESTS
    assert len(got["tests"][-1]["messages"]) == 1 and len(got["tests"][-1]["messages"][0]) <= dcgm_diag.MAX_MESSAGE
