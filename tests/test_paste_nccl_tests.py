"""The nccl-tests reader over real published nccl-tests outputs (tests/fixtures/benchmarks/nccl-tests, sources in
tests/fixtures/benchmarks/SOURCES.md): every run each one shows, with its devices, peak and average bus bandwidth;
the exact shape the judges read; runs inside other text, launcher prefixes, several runs in one paste; the `-J`
JSON file; and bad input."""

from __future__ import annotations

import json
import random
from typing import Any, NamedTuple

import pytest
from helpers.common import FIXTURES, read_amid
from helpers.growth import LINEAR, K, growth

from gpudoctor.paste import nccl_tests
from gpudoctor.paste.found import Found

RUNS = FIXTURES / "benchmarks" / "nccl-tests"
PASTES = FIXTURES / "pastes"


class Run(NamedTuple):
    """What a judge reads first of a run: where, what, on how many GPUs, and its bandwidth."""

    line: int
    collective: str | None
    ranks: int | None
    hosts: list[str]
    rows: int
    peak: tuple[int, float] | None  # (bytes, out-of-place busbw) of the row with the highest busbw
    avg_busbw: float | None
    out_of_bounds: int | None
    version: str | None
    nccl_version: str | None


def runs_in(text: str) -> list[dict[str, Any]]:
    """The reader alone, lines split as paste.read splits them."""
    found = Found.of(text)
    nccl_tests.read(found)
    return found.facts.get("benchmarks", {}).get("nccl_tests", [])


def text_of(name: str) -> str:
    return (RUNS / name).read_text(encoding="utf-8")


def summary(run: dict[str, Any]) -> Run:
    peak = max(run["rows"], key=lambda row: row["out_of_place"]["busbw"], default=None)
    return Run(
        run["line"],
        run["collective"],
        run["ranks"],
        run["hosts"],
        len(run["rows"]),
        (peak["bytes"], peak["out_of_place"]["busbw"]) if peak else None,
        run["avg_busbw"],
        run["out_of_bounds"],
        run["version"],
        run["nccl_version"],
    )


LOCAL = ["localhost"]
GH200 = ["nid005471", "nid005487"]
NVIDIATOOLS = ["nvidiatools-29-workload", "nvidiatools-30-workload"]
EXPECTED = {
    # table only: the program's command line was above the publisher's excerpt
    "a100-sxm-8gpu-sendrecv.txt": [Run(2, None, None, [], 4, (1073741824, 195.1), None, None, None, None)],
    # the old format (before v2.13): "Rank  0 Pid", no root, an "error" column; NCCL's INFO line inside the table
    "a100-sxm4-40gb-8gpu-allgather.txt": [Run(1, None, 8, LOCAL, 34, (8589934592, 223.39), 58.2651, 0, None, None)],
    "a100-sxm4-40gb-8gpu-allreduce.txt": [Run(1, None, 8, LOCAL, 34, (8589934592, 235.26), 68.4048, 0, None, None)],
    "a100-sxm4-40gb-8gpu-alltoall.txt": [Run(1, None, 8, LOCAL, 34, (8589934592, 224.31), 58.6481, 0, None, None)],
    "a100-sxm4-40gb-8gpu-reducescatter.txt": [Run(1, None, 8, LOCAL, 34, (8589934592, 231.52), 60.168, 0, None, None)],
    # srun -l's "0: " on every line, no header
    "a100-sxm4-80gb-16gpu-2node-aws-p4de-allreduce-excerpt.txt": [
        Run(1, None, None, [], 29, (2147483648, 78.33), None, None, None, None)
    ],
    "b200-16gpu-2node-gcp-a4-allgather.txt": [
        Run(1, None, 16, ["nccl-gib-test-0", "nccl-gib-test-1"], 24, (4294967296, 261.57), 59.3638, 0, None, "2.26.6")
    ],
    "b200-2gpu-allgather-nvlink-elided.txt": [
        Run(1, None, 2, ["nccl-gib-test-0"], 8, (8589934592, 482.71), None, None, None, "2.26.6")
    ],
    # only the last device line is shown: the ranks are its rank + 1
    "gb200-144gpu-2rack-allreduce-excerpt.txt": [
        Run(1, None, 144, ["slurm-gb200-207-171"], 6, (17179869184, 810.41), 688.487, 0, None, None)
    ],
    "gb200-nvl72-72gpu-1rack-allreduce-excerpt.txt": [
        Run(1, None, 72, ["slurm-gb200-207-171"], 5, (4294967296, 839.16), 745.53, 0, None, None)
    ],
    "gh200-2gpu-2node-1perhost-allreduce-2.18.2.txt": [
        Run(2, "all_reduce", 2, ["nid007106", "nid007109"], 8, (134217728, 22.86), 14.9966, 0, "2.18.2", "2.30.7")
    ],
    # two runs in a Markdown page: the same 8 GPUs with the fast network, then without it
    "gh200-8gpu-2node-4perhost-allreduce-cxi-then-tcp-two-runs.txt": [
        Run(4, "all_reduce", 8, GH200, 25, (134217728, 122.57), 19.7866, 0, None, None),
        Run(54, "all_reduce", 8, GH200, 25, (8388608, 6.02), 1.58767, 0, None, None),
    ],
    "h100-sxm-16gpu-2node-allreduce.txt": [
        Run(1, None, 16, ["host1", "host2"], 6, (8589934592, 467.97), 443.007, 0, None, None)
    ],
    "h100-sxm-16gpu-2node-aws-p5-allreduce-excerpt.txt": [
        Run(1, None, None, [], 32, (17179869184, 487.09), None, None, None, None)
    ],
    "h100-sxm-16gpu-2node-gcp-a3mega-tcpxo-allreduce.txt": [
        Run(1, None, 16, ["ztan-mig-235z", "ztan-mig-gq73"], 31, (8589934592, 338.82), 70.742, 0, None, None)
    ],
    "h100-sxm-64gpu-8node-ib-sharp-allreduce-excerpt.txt": [
        Run(1, None, None, [], 5, (8589934592, 386.56), 373.187, 0, None, None)
    ],
    "h100-sxm-8gpu-allreduce-nvls.txt": [Run(1, None, 8, ["host"], 4, (2147483648, 470.73), 448.212, 0, None, None)],
    "h200-16gpu-2node-socket-ring-allreduce.txt": [
        Run(
            3,
            "all_reduce",
            16,
            ["nvidiatools-dgx-2d-workload", "nvidiatools-dgx-9d-workload"],
            32,
            (8589934592, 92.35),
            36.2205,
            0,
            None,
            "2.27.3",
        )
    ],
    "h200-2gpu-2node-1nic-allreduce.txt": [
        Run(
            1,
            None,
            2,
            ["nccl-test-dranet-1gpu-1nic-worker-0", "nccl-test-dranet-1gpu-1nic-worker-1"],
            24,
            (8589934592, 31.89),
            15.5188,
            0,
            None,
            None,
        )
    ],
    "l40s-2gpu-2node-1perhost-socket-ring-allreduce.txt": [
        Run(2, "all_reduce", 2, NVIDIATOOLS, 31, (8589934592, 8.11), 3.98762, 0, None, "2.27.3")
    ],
    "l40s-4gpu-2node-2perhost-rdma-ring-allreduce.txt": [
        Run(2, "all_reduce", 4, NVIDIATOOLS, 31, (8589934592, 9.63), 4.74277, 0, None, "2.27.3")
    ],
    "rtx4090-2gpu-pcie-allreduce.txt": [
        Run(1, None, 2, ["f7dce118f2b2"], 29, (1073741824, 2.24), 1.18707, 0, None, None)
    ],
    "rtx4090-4gpu-pcie-allreduce.txt": [
        Run(1, None, 4, ["bd4e8bef7fdf"], 29, (2147483648, 2.59), 1.40135, 0, None, None)
    ],
    # mpirun --tag-output's "[1,0]<stdout>:" on every line; "all_reduce_perf_mpi"
    "rtx5090-2ranks-1gpu-socket-mpirun-tag-output-allreduce.txt": [
        Run(9, "all_reduce", 2, ["lab"], 8, (134217728, 2.3), 1.57614, 0, "2.18.0", "2.29.7")
    ],
}
RUN_KEYS = {
    "line",
    "format",
    "collective",
    "ranks",
    "hosts",
    "devices",
    "rows",
    "avg_busbw",
    "out_of_bounds",
    "version",
    "nccl_version",
    "env",
    "max_bytes",
    "failure",
}
COLLECTIVES = {
    None,
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "alltoallv",
    "sendrecv",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "hypercube",
}
ROW_KEYS = {"bytes", "count", "type", "redop", "root", "out_of_place", "in_place"}
SIDE_KEYS = {"time_us", "algbw", "busbw", "wrong"}


def test_every_nccl_tests_fixture_is_expected() -> None:
    assert sorted(p.name for p in RUNS.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_fixture_gives_the_runs_it_shows(name: str) -> None:
    assert [summary(run) for run in runs_in(text_of(name))] == EXPECTED[name]


def assert_shaped(run: dict[str, Any]) -> None:
    """Exactly the keys the judges read, each of its type."""
    assert set(run) == RUN_KEYS
    assert isinstance(run["line"], int) and run["line"] >= 1
    assert run["format"] in ("text", "json")
    assert run["collective"] in COLLECTIVES
    assert run["hosts"] == list(dict.fromkeys(d["host"] for d in run["devices"]))
    assert isinstance(run["env"], dict)
    for device in run["devices"]:
        assert set(device) == {"rank", "host", "device", "bus_id", "name"}
    for row in run["rows"]:
        assert set(row) == ROW_KEYS
        assert isinstance(row["bytes"], int) and isinstance(row["count"], int) and isinstance(row["type"], str)
        for side in (row["out_of_place"], row["in_place"]):
            assert side is None or SIDE_KEYS <= set(side) <= {*SIDE_KEYS, "error"}
            assert side is None or all(isinstance(side[k], float) for k in ("time_us", "algbw", "busbw"))
    assert run["max_bytes"] == max((row["bytes"] for row in run["rows"]), default=None)
    json.dumps(run, allow_nan=False)  # what a snapshot can hold


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_run_has_exactly_the_shape_the_judges_read(name: str) -> None:
    for run in runs_in(text_of(name)):
        assert_shaped(run)
        assert run["format"] == "text" and all(
            k.startswith("NCCL_") and isinstance(v, str) for k, v in run["env"].items()
        )


def test_device_lines_of_every_era_are_read() -> None:
    """2.13.4+ with Group and the short bus id, 2.14.1+ with domain:bus:device, before 2.13.4 without Group;
    v1.0.0's line (no Pid) as src/common.cu of v1.0.0 printed it ("#   Rank %2d on %10s device %2d [0x%02x] %s",
    written here from that format)."""
    assert runs_in(text_of("h100-sxm-8gpu-allreduce-nvls.txt"))[0]["devices"][7] == {
        "rank": 7,
        "host": "host",
        "device": 7,
        "bus_id": "0xdf",
        "name": "NVIDIA H100 80GB HBM3",
    }
    assert runs_in(text_of("b200-16gpu-2node-gcp-a4-allgather.txt"))[0]["devices"][9] == {
        "rank": 9,
        "host": "nccl-gib-test-1",
        "device": 1,
        "bus_id": "0000:90:00",
        "name": "NVIDIA B200",
    }
    old = runs_in(text_of("a100-sxm4-40gb-8gpu-allreduce.txt"))[0]["devices"][3]
    assert old == {"rank": 3, "host": "localhost", "device": 3, "bus_id": "0x00", "name": "A100-SXM4-40GB"}
    v1 = runs_in("#   Rank  1 on   dgx-01 device  1 [0x07] Tesla V100-SXM2-32GB")[0]
    assert v1["devices"] == [
        {"rank": 1, "host": "dgx-01", "device": 1, "bus_id": "0x07", "name": "Tesla V100-SXM2-32GB"}
    ]
    assert v1["ranks"] == 2 and v1["rows"] == []


def test_rows_keep_what_each_format_prints() -> None:
    allreduce = runs_in(text_of("h100-sxm-8gpu-allreduce-nvls.txt"))[0]["rows"][0]
    assert allreduce == {
        "bytes": 268435456,
        "count": 67108864,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_of_place": {"time_us": 1119.8, "algbw": 239.71, "busbw": 419.49, "wrong": 0},
        "in_place": {"time_us": 1117.4, "algbw": 240.24, "busbw": 420.42, "wrong": 0},
    }
    sendrecv = runs_in(text_of("a100-sxm-8gpu-sendrecv.txt"))[0]["rows"][-1]
    assert sendrecv["in_place"] == {"time_us": 5490.5, "algbw": 195.56, "busbw": 195.56, "wrong": None}  # "N/A"
    allgather = runs_in(text_of("b200-16gpu-2node-gcp-a4-allgather.txt"))[0]["rows"][-1]
    assert (allgather["redop"], allgather["root"], allgather["out_of_place"]["time_us"]) == ("none", -1, 30970.0)


def test_the_old_format_keeps_its_error_column_and_prints_no_root() -> None:
    """Before v2.13 all_gather printed no redop, alltoall an empty one, and each side a float "error"."""
    for name, redop in (
        ("a100-sxm4-40gb-8gpu-allgather.txt", None),
        ("a100-sxm4-40gb-8gpu-alltoall.txt", None),
        ("a100-sxm4-40gb-8gpu-allreduce.txt", "sum"),
        ("a100-sxm4-40gb-8gpu-reducescatter.txt", "sum"),
    ):
        row = runs_in(text_of(name))[0]["rows"][-1]
        assert (row["redop"], row["root"]) == (redop, None), name
        assert row["out_of_place"]["wrong"] is None and row["out_of_place"]["error"] is None, name  # "N/A"
    # with validation on, "%5.0le": rows of https://github.com/NVIDIA/nccl-tests/issues/44 (2x 2080 Ti, NVLink)
    table = [
        "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error",
        "       32768          4096   float    13.39    1.22    1.22  0e+00    11.85    1.38    1.38  0e+00",
        "   134217728      16777216   float   3298.6   20.34   20.34  0e+00   3070.3   21.86   21.86  0e+00",
    ]
    for text in ("\n".join(table), "\n".join(table[1:])):  # with its header and without
        rows = runs_in(text)[0]["rows"]
        assert rows[1]["in_place"] == {"time_us": 3070.3, "algbw": 21.86, "busbw": 21.86, "wrong": None, "error": 0.0}


def test_a_run_whose_table_never_came_is_a_run_without_rows() -> None:
    """nccl-tests' header in an NCCL_DEBUG=INFO log (the NCCL log fixtures): the devices, NCCL's version."""
    nccl = PASTES / "nccl"
    v100 = runs_in((nccl / "info-2.4.8-nccl-tests-lo-socket-v100.txt").read_text(encoding="utf-8"))
    assert [summary(run) for run in v100] == [Run(1, None, 2, ["ds-ml-01-0"], 0, None, None, None, None, "2.4.8")]
    a100 = runs_in((nccl / "info-2.18.1-nccl-tests-8xa100-bootstrap-ib-ipoib.txt").read_text(encoding="utf-8"))
    assert [summary(run) for run in a100] == [Run(1, None, 16, ["user"], 0, None, None, None, None, "2.18.1")]
    # the header line v1.0.0 printed without "# ", then the failure (https://github.com/NVIDIA/nccl-tests/issues/1)
    failed = runs_in(
        "mpirun -n 2 -npernode 2 -hostfile ./hosts ./build/all_reduce_perf -g 2 -c 0 \n"
        "nThread 1 nGpus 2 minBytes 33554432 maxBytes 33554432 step: 1048576(bytes) warmup iters: 5 iters: 20 "
        "validation: 0 \nCuda failure common.cu:891 'invalid device ordinal'"
    )
    assert [summary(run) for run in failed] == [Run(2, "all_reduce", None, [], 0, None, None, None, None, None)]
    assert failed[0]["failure"] == "Cuda failure common.cu:891 'invalid device ordinal'"
    assert v100[0]["failure"] is None and a100[0]["failure"] is None


def test_nccl_tests_own_failure_line_of_every_era_is_the_runs_failure() -> None:
    """src/common.h NCCLCHECK and CUDACHECK: "%s: Test NCCL failure %s:%d '%s / %s'" (v2.13.0 on, the hostname
    first), "'%s'" alone before; v1.0.0 without "Test "; NCCL's own "Cuda failure '...'" log line is not one."""
    header = (
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
    )
    lines = {
        "node7: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '": (
            "Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '"
        ),
        "node7: Test CUDA failure common.cu:892 'out of memory'": "Test CUDA failure common.cu:892 'out of memory'",
        "NCCL failure common.cu:874 'unhandled system error'": "NCCL failure common.cu:874 'unhandled system error'",
        "node7:1:1 [0] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'": None,
    }
    for line, failure in lines.items():
        assert [run["failure"] for run in runs_in(header + line)] == [failure], line


def test_the_program_named_on_the_command_line_is_the_collective() -> None:
    """The command the publisher ran, the line above the excerpt in li-plus/playground's cuda/nccl.md."""
    run = runs_in("./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8\n" + text_of("a100-sxm-8gpu-sendrecv.txt"))[0]
    assert (run["line"], run["collective"]) == (3, "sendrecv")
    # a program named after the run is another run's; "_mpi" builds and paths are the same program
    after = runs_in(text_of("h100-sxm-8gpu-allreduce-nvls.txt") + "\nnext: ./build/alltoall_perf_mpi -g 8")
    assert after[0]["collective"] is None
    for program, name in [
        ("all_reduce_perf", "all_reduce"),
        ("/opt/nccl-tests/build/reduce_scatter_perf", "reduce_scatter"),
        ("reduce_perf", "reduce"),
        ("alltoall_perf_mpi", "alltoall"),
        ("hypercube_perf", "hypercube"),
        ("my_all_reduce_perf_wrapper.sh", None),
    ]:
        assert nccl_tests.collective_name(program) == name, program


@pytest.mark.parametrize("kind", ["collect_env", "nvidia-smi", "errors", "kernel", "bug-report", "issues"])
def test_a_row_amid_another_kind_of_paste_is_a_run_of_its_own(kind: str) -> None:
    """Other kinds of paste give no run; with one real row put in the middle, they give that row alone."""
    row = text_of("h100-sxm-8gpu-allreduce-nvls.txt").split("\n")[-4]
    for path in sorted((PASTES / kind).glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        assert runs_in(text) == [], path.name
        runs = read_amid(text, row, nccl_tests.read).facts["benchmarks"]["nccl_tests"]
        assert [(len(r["rows"]), r["ranks"], r["devices"], r["max_bytes"]) for r in runs] == [
            (1, None, [], 2147483648)
        ], path.name


PREFIXES = [
    "0: ",
    " 12: ",
    "[1,0]<stdout>:",
    "rank0: ",
    "[rank0]: ",
    "10.0.0.1: 10.0.0.1: ",
    "> ",
    "2024-12-04T05:27:44.078Z ",
]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_launcher_prefixes_are_read_through(prefix: str) -> None:
    """srun -l, mpirun --tag-output, torchrun, pdsh, Markdown quotes, kubectl --timestamps on every line of a
    real run read as the run itself."""
    text = text_of("h100-sxm-16gpu-2node-allreduce.txt")
    prefixed = "\n".join(prefix + line for line in text.split("\n"))
    assert runs_in(prefixed) == runs_in(text)


def test_an_mpi_tag_inside_a_row_is_read_through() -> None:
    """Output tags spliced into rows, as pasted in https://github.com/NVIDIA/nccl/issues/1453."""
    row = (
        "[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]"
        "    2302.3    0.46    0.87      0"
    )
    (run,) = runs_in(row)
    assert run["rows"][0]["out_of_place"]["busbw"] == 1.24 and run["rows"][0]["in_place"]["time_us"] == 2302.3


def test_every_run_of_a_long_log_is_found_as_it_is_alone() -> None:
    """All fixtures one after another, as a job that runs the tests in turn would print them."""
    names = sorted(EXPECTED)
    texts = [text_of(name) for name in names]
    runs = runs_in("\n".join(texts))
    alone = [run for name in names for run in EXPECTED[name]]
    assert [summary(run)._replace(line=0) for run in runs] == [run._replace(line=0) for run in alone]
    offsets = [0]
    for text in texts[:-1]:
        offsets.append(offsets[-1] + text.count("\n") + 1)
    starts = [offset + run.line for name, offset in zip(names, offsets, strict=True) for run in EXPECTED[name]]
    assert [run["line"] for run in runs] == starts


def test_a_build_without_mpi_gives_one_run_per_process() -> None:
    """Under mpirun each process of such a build prints its own header and its own "Rank  0":
    https://github.com/NVIDIA/nccl-tests/issues/306 (two H20 nodes, the header printed twice, interleaved; the
    stored excerpt ends at node2's Rank 4)."""
    header = (
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20"
        " agg iters: 1 validation: 1 graph: 0"
    )
    buses = ["0f", "10", "41", "44", "90", "91", "b8", "bb"]
    lines = [header, "#", "# Using devices", header, "#", "# Using devices"]
    for host, pid, shown in (("node3", 1530412, 8), ("node2", 2236260, 5)):
        lines += [
            f"#  Rank  {i} Group  0 Pid {pid} on      {host} device  {i} [0000:{bus}:00] NVIDIA H20"
            for i, bus in enumerate(buses[:shown])
        ]
    runs = runs_in("\n".join(lines))
    assert [(r["line"], r["ranks"], r["hosts"]) for r in runs] == [(1, 8, ["node3"]), (15, 5, ["node2"])]
    # one process after another, each a whole single-GPU run (written from src/util.cu's formats): busbw is 0
    single = "\n".join(
        "\n".join(
            [
                "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1"
                " validation: 1 graph: 0",
                "# Using devices",
                f"#  Rank  0 Group  0 Pid  {pid} on {host} device  0 [0000:1b:00] NVIDIA H100 80GB HBM3",
                "           8             2     float     sum      -1     4.10    0.00    0.00      0     0.30    0.03"
                "    0.00      0",
                "# Out of bounds values : 0 OK",
                "# Avg bus bandwidth    : 0 ",
            ]
        )
        for host, pid in (("node-a", 1001), ("node-b", 2002))
    )
    runs = runs_in(single)
    assert [(r["ranks"], r["hosts"], r["avg_busbw"], r["rows"][0]["out_of_place"]["busbw"]) for r in runs] == [
        (1, ["node-a"], 0.0, 0.0),
        (1, ["node-b"], 0.0, 0.0),
    ]


def test_per_iteration_and_timestamp_columns_are_read_past() -> None:
    """-I 1 adds "i_min i_max i_p99 i_cv%" to each side, -S 1 a timestamp (rows written from src/util.cu's
    writeBenchmarkLineBody, writePerIterReport and writeTimestamp formats)."""
    per_iter = (
        "     1048576        262144     float     sum      -1   339.61    3.09    3.09       0   330.01   352.10"
        "   351.20     2.31   335.85    3.12    3.12       0   331.00   350.00   349.10     2.20"
    )
    stamped = (
        "     2097152        524288     float     sum      -1   355.53    5.90    5.90       0   361.77    5.80"
        "    5.80       0  2026-03-11 12:00:01"
    )
    rows = runs_in(f"{per_iter}\n{stamped}")[0]["rows"]
    assert [(r["bytes"], r["out_of_place"]["busbw"], r["in_place"]["time_us"]) for r in rows] == [
        (1048576, 3.09, 335.85),
        (2097152, 5.9, 361.77),
    ]


# A -J file as src/util.cu (NCCL_TESTS_VERSION 2.19.6, JSON_FILE_VERSION 3) writes it: one line, "%lf" doubles,
# "true"/"false" strings, root as "%6i" text, nwrong null without validation. No real one was found published;
# this is written by hand from the writer, with values from h100-sxm-8gpu-allreduce-nvls.txt.
JSON_RUN = (
    '{"version":3,"start_time":"2026-03-11 12:00:00","args":["./build/all_reduce_perf","-b","256M","-e","512M",'
    '"-g","2","-J","out.json"],"env":["HOME=/root","NCCL_ALGO=Ring","NCCL_DEBUG=VERSION","PATH=/usr/bin"],'
    '"nccl_version":22105,"config":{"nthreads":1,"ngpus":2,"minimum_bytes":268435456,"maximum_bytes":536870912,'
    '"step_factor":2,"warmup_iters":5,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,'
    '"blocking_collectives":"false","per_iter_timing":"false","per_iter_skip":0,"parallel_init":"false",'
    '"devices":[{"rank":0,"group":0,"pid":1623025,"hostname":"host","device":0,"device_hex":"0000:1b:00",'
    '"device_info":"NVIDIA H100 80GB HBM3"},{"rank":1,"group":0,"pid":1623025,"hostname":"host","device":1,'
    '"device_hex":"0000:43:00","device_info":"NVIDIA H100 80GB HBM3"}]},"results":[{"size":268435456,'
    '"count":67108864,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":1119.800000,'
    '"alg_bw":239.710000,"bus_bw":419.490000,"nwrong":0.000000},"in_place":{"time":1117.400000,'
    '"alg_bw":240.240000,"bus_bw":420.420000,"nwrong":null},"actual_iterations":20,"experiment_name":""},'
    '{"size":536870912,"count":134217728,"type":"float","redop":"sum","root":"    -1","out_of_place":{'
    '"time":2157.500000,"alg_bw":248.830000,"bus_bw":435.460000,"nwrong":0.000000},"in_place":{"time":"nan",'
    '"alg_bw":"nan","bus_bw":"nan","nwrong":null},"actual_iterations":20,"experiment_name":""}],'
    '"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":427.475000,'
    '"okay":"unchecked"},"end_time":"2026-03-11 12:00:09"}'
)


def test_a_json_file_is_one_run_in_the_same_shape() -> None:
    (run,) = runs_in(JSON_RUN)
    assert_shaped(run)
    assert {k: v for k, v in run.items() if k not in ("devices", "rows")} == {
        "line": 1,
        "format": "json",
        "collective": "all_reduce",
        "ranks": 2,
        "hosts": ["host"],
        "avg_busbw": 427.475,
        "out_of_bounds": 0,
        "version": None,  # the file's "version" is its format's, not nccl-tests'
        "nccl_version": "2.21.5",
        "env": {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "VERSION"},
        "max_bytes": 536870912,
        "failure": None,
    }
    assert run["devices"][1] == {
        "rank": 1,
        "host": "host",
        "device": 1,
        "bus_id": "0000:43:00",
        "name": "NVIDIA H100 80GB HBM3",
    }
    assert run["rows"][0] == {
        "bytes": 268435456,
        "count": 67108864,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "out_of_place": {"time_us": 1119.8, "algbw": 239.71, "busbw": 419.49, "wrong": 0},
        "in_place": {"time_us": 1117.4, "algbw": 240.24, "busbw": 420.42, "wrong": None},
    }
    assert run["rows"][1]["in_place"] is None  # "nan" written as a string


def test_json_of_v2_17_3_to_v2_17_8_spelt_its_summary_otherwise() -> None:
    """src/util.cu wrote "average_bus_bandwidith": {"bandwidith": ...} until v2.17.9."""
    old = JSON_RUN.replace('"average_bus_bandwidth":{"bandwidth"', '"average_bus_bandwidith":{"bandwidith"')
    assert old != JSON_RUN
    assert runs_in(old) == runs_in(JSON_RUN)


def test_json_pretty_printed_or_inside_a_log_is_read_and_other_json_is_not() -> None:
    pretty = json.dumps(json.loads(JSON_RUN), indent=2)
    assert runs_in("\n\n" + pretty)[0] == {**runs_in(JSON_RUN)[0], "line": 3}
    log = f"# Writing JSON output to out.json\n{JSON_RUN}\n" + text_of("h100-sxm-8gpu-allreduce-nvls.txt")
    assert [(r["format"], r["line"]) for r in runs_in(log)] == [("json", 2), ("text", 3)]
    for other in ['{"results": [1, 2]}', '{"config": {}}', "[1, 2]", '{"results": "x", "config": {}}', JSON_RUN[:-1]]:
        assert runs_in(other) == [], other


def test_json_with_wrong_types_gives_what_is_well_formed() -> None:
    document = json.loads(JSON_RUN)
    document["config"]["devices"] = [{"rank": "0"}, None, {"rank": 3, "hostname": "h", "device": True}]
    document["results"] = [None, {"size": "8"}, {"size": 8, "count": 2, "type": "half", "root": "x", "in_place": []}]
    document["nccl_version"] = "22105"
    document["env"] = ["NCCL_X", 5, "NCCL_Y=1=2"]
    (run,) = runs_in(json.dumps(document))
    assert_shaped(run)
    assert run["devices"] == [{"rank": 3, "host": "h", "device": None, "bus_id": None, "name": None}]
    assert [(r["bytes"], r["root"], r["out_of_place"], r["in_place"]) for r in run["rows"]] == [(8, None, None, None)]
    assert (run["nccl_version"], run["env"]) == (None, {"NCCL_Y": "1=2"})


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (22105, "2.21.5"),
        (23004, "2.30.4"),
        (21903, "2.19.3"),
        (2804, "2.8.4"),
        (2408, "2.4.8"),
        (0, None),
        (15000, None),
    ],
)
def test_nccl_version_codes_are_dotted(code: int, text: str | None) -> None:
    """NCCL_VERSION_CODE: X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before."""
    assert nccl_tests.nccl_version_text(code) == text


ROW = (
    "  2147483648     536870912     float     sum      -1   7983.5  268.99  470.73      0   7985.2  268.93"
    "  470.63      0"
)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "#",
        "# Avg bus bandwidth    :",
        "# Out of bounds values : many",
        "#  Rank",
        "#  Rank  0 Group  0 Pid 1 on host device",
        "# nccl-tests version",
        ROW[:60],  # a cut row
        ROW.replace("2147483648", "9" * 5000),  # a number too long to be one
        ROW.replace("470.73", "1e999"),  # not finite
        ROW.replace("470.73", "nan"),
        ROW.replace("float", "1.5"),
        ROW.replace("  -1  ", "  x  "),
        ROW + "  17",
        "1 2 3 4 5 6 7 8 9 10 11 12 13",
        "2024 04 19 float sum 1 2 3 4 5 6 7 8 and more words",
    ],
)
def test_bad_lines_give_nothing(text: str) -> None:
    assert runs_in(text) == []


def test_a_cut_row_inside_a_table_is_skipped_and_the_rest_read() -> None:
    lines = text_of("h100-sxm-8gpu-allreduce-nvls.txt").split("\n")
    lines[16] = lines[16][:70]
    (run,) = runs_in("\n".join(lines))
    assert [row["bytes"] for row in run["rows"]] == [268435456, 1073741824, 2147483648]


def test_shuffled_cut_and_junk_input_never_raises_and_keeps_the_shape() -> None:
    rng = random.Random(17)
    lines = [line for name in sorted(EXPECTED) for line in text_of(name).split("\n")]
    for _ in range(150):
        sample = rng.sample(lines, 60)
        sample = [line[: rng.randrange(len(line) + 1)] if rng.random() < 0.3 else line for line in sample]
        for run in runs_in("\n".join(sample)):
            assert_shaped(run)
    junk = bytes(rng.randrange(256) for _ in range(200_000)).decode("latin-1")
    assert runs_in(junk) == []
    for cut in range(0, len(JSON_RUN), 97):
        for run in runs_in(JSON_RUN[:cut] + JSON_RUN[cut + 5 :]):
            assert_shaped(run)


def test_a_5_mb_log_is_read_whole_and_in_linear_time() -> None:
    """Every fixture and every NCCL log fixture repeated to 5 MB; K times the log is about K times the work
    (tests/helpers/growth.py, up to 1.25 MB)."""
    paths = [*sorted(RUNS.glob("*.txt")), *sorted((PASTES / "nccl").glob("*.txt"))]
    chunk = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in paths)

    def log(size: int) -> str:
        return (chunk + "\n") * (size // len(chunk) + 1)

    grew = growth(lambda text: nccl_tests.read(Found.of(text)), log(1_250_000 // K), log(1_250_000))
    assert grew < LINEAR, f"{grew:.0f} times the work on {K} times the log"
    found = Found.of(log(5_000_000))
    nccl_tests.read(found)
    assert len(found.facts["benchmarks"]["nccl_tests"]) > 1000
