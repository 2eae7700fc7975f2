"""compute.sdc (silent data corruption) on the CPU for real: gloo ranks, CPU kernels, the check through the installed
command; the test hook that flips one bit of one operation's output on one rank (GPUDOCTOR_INJECT_FAULT kind=corrupt)
named with the rank, the operation, the repeat and the element, and the command that reproduces the case giving a
healthy rank's digest. The error bound against real kernels over many seeds and magnitudes, against a chopped
accumulation (as tensor cores sum) that reaches it, and against a product made in a lower precision than it claims.
The verdicts on fixtures of the ranks' data. cluster.sdc across namespace hosts is in tests/test_cluster.py."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch
from helpers.common import gpudoctor

from gpudoctor.checks import sdc as check
from gpudoctor.checks.ranks import sdc as ranks
from gpudoctor.judging import sdc
from gpudoctor.model import Status
from gpudoctor.workloads.launch import Fault, launch

LEAN = {"n": 128, "seed": sdc.SEED, "repeats": 4, "reference_rows": 32}


def flipped(fault_at: str, world: int) -> list[dict[str, Any]]:
    """Every rank's data from a run where rank 1 flips one bit of the output at the phase `fault_at`."""
    outcome = launch(check.WORKER, world, "gloo", LEAN, 120, Fault(1, "corrupt", fault_at))
    assert outcome.status == Status.PASS, outcome.message
    return outcome.data


# --- the check, for real --------------------------------------------------------------------------------------------
def test_the_check_runs_on_gloo_ranks_and_passes(no_leftovers) -> None:
    proc = gpudoctor("check", "--only", "compute.sdc", "--level", "standard", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)["checks"][0]
    assert result["status"] == "pass", result
    assert result["summary"].startswith("2 ranks: 6 operations x 5 repeats, bit for bit the same on every repeat")
    assert "not judged: gemm-tf32 on rank 0 and rank 1 (TF32 is a GPU format" in result["summary"]
    shares = [m["value"] for row in result["rows"] for m in row["metrics"] if m["name"] == "bound_share"]
    assert len(shares) == 2 and all(0 < share < 1 for share in shares), shares


def test_a_bit_flipped_on_one_rank_fails_naming_rank_operation_element_and_the_reproduction(no_leftovers) -> None:
    """Rank 1 flips one bit of the fp32 GEMM's largest element on every repeat: its repeats agree, its digest is not
    rank 0's, and with two ranks no majority tells which is right: the fp64 reference at the first differing
    element does. The reproduction command, run on this healthy CPU, prints rank 0's digest."""
    fault = {"GPUDOCTOR_INJECT_FAULT": "rank=1,kind=corrupt,at=sdc gemm-fp32"}
    proc = gpudoctor("check", "--only", "compute.sdc", "--level", "standard", "--json", env=fault)
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = json.loads(proc.stdout)["checks"][0]
    rows = {row["name"]: row for row in result["rows"]}
    assert (result["status"], rows["rank 0"]["status"], rows["rank 1"]["status"]) == ("fail", "pass", "fail")
    said = rows["rank 1"]["summary"]
    assert said.startswith("gemm-fp32 (repeat 0): rank 0 and rank 1 disagree with no majority (digests rank 0's ")
    assert re.search(r"this one is beyond its fp64 bound, first at element \[\d+, \d+\] \(.+, 8388608 ULPs\)", said)
    assert result["summary"].startswith("rank 1: gemm-fp32")
    command = shlex.split(result["remediation"]["commands"][0])
    assert command[:5] == ["python", "-m", "gpudoctor.checks.ranks.sdc", "--case", "gemm-fp32"]
    rerun = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    healthy = re.search(r"rank 0's ([0-9a-f]{16})", said)
    assert healthy and json.loads(rerun.stdout)["digest"] == healthy.group(1)


def test_a_bit_flipped_in_one_repeat_is_named_with_the_repeat_and_element(no_leftovers) -> None:
    """A transient fault: one repeat of the elementwise chain on rank 1 differs from its first; the first repeats of
    both ranks agree, so nothing but its own repeats names it."""
    data = flipped("sdc chain-fp32 repeat 2", 2)
    result = check.judge_node([(m, None) for m in data], LEAN)
    assert [row.status for row in result.rows] == [Status.PASS, Status.FAIL]
    assert re.fullmatch(
        r"chain-fp32: repeat 2 differs from repeat 0, first at element \[\d+, \d+\] \(\S+ vs \S+, 8388608 ULPs\)",
        result.rows[1].summary,
    )
    assert "--case chain-fp32" in result.remediation.commands[0]


@pytest.mark.slow  # the majority's verdict is the cluster test's (tests/test_cluster.py) and the fixtures' below
def test_the_one_rank_of_three_whose_bits_differ_is_named_by_the_majority(no_leftovers) -> None:
    data = flipped("sdc sum-fp32", 3)
    result = check.judge_node([(m, None) for m in data], LEAN)
    assert [row.status for row in result.rows] == [Status.PASS, Status.FAIL, Status.PASS]
    assert result.rows[1].summary.startswith("sum-fp32 (repeat 0): not the bits of the majority of its peers (rank 0")


def test_the_reproduction_refuses_bad_arguments() -> None:
    with pytest.raises(SystemExit) as refused:
        ranks.main(["--case", "gemm-fp32", "--repeats", "0", "--device", "cpu"])
    assert refused.value.code == 2


# --- the bound ------------------------------------------------------------------------------------------------------
def wide(shape: tuple[int, ...], generator: torch.Generator, spread: int) -> torch.Tensor:
    """Random values whose rows span 2^-spread to 2^spread: the bound must hold whatever the magnitudes."""
    scale = 2.0 ** torch.randint(-spread, spread + 1, (shape[0], *([1] * (len(shape) - 1))), generator=generator)
    return torch.randn(shape, generator=generator, dtype=torch.float64) * scale


def used(kind: str, precision: str, inputs: list[torch.Tensor]) -> float:
    """The largest share of its bound any output element of the operation, run by this CPU's kernels, used."""
    storage = ranks.DTYPES[sdc.PRECISIONS[precision].storage]
    exact = [t.to(storage) for t in inputs]
    got = ranks.apply(kind, exact).double()
    expected, allowed, _ = ranks.reference(kind, precision, exact, torch.arange(exact[0].shape[0]))
    return float(((got - expected).abs() / allowed).max())


@pytest.mark.parametrize("case", list(sdc.CASES))
def test_the_bound_never_fails_a_healthy_operation_over_many_seeds_and_magnitudes(case: str) -> None:
    kind, precision = sdc.CASES[case]
    spread = 3 if precision == "fp16" else 12  # fp16 overflows past 65504
    worst = 0.0
    for seed in range(3 if kind == "conv" else 20):
        generator = torch.Generator().manual_seed(seed)
        n = int(torch.randint(8, 200, (), generator=generator))
        if kind == "conv":
            inputs = [wide((2, *ranks.IMAGE), generator, spread), wide(ranks.FILTERS, generator, spread)]
        elif kind == "gemm":
            inputs = [wide((n, n + 7), generator, spread), wide((n + 7, n), generator, spread)]
        elif kind == "sum":
            inputs = [wide((n, 4 * n), generator, spread)]
        else:
            inputs = [ranks.grid((n, n), seed, 0.5, 2.0)]
        worst = max(worst, used(kind, precision, inputs))
    assert 0 < worst < 1, worst


def chopped_sum(values: list[float]) -> float:
    """A sequential fp32 sum that truncates every partial sum toward zero, as tensor cores' accumulation does (Fasi
    et al. 2021): the exact sum of two fp32 values is an fp64 one for these inputs, then chopped."""
    total = np.float32(0)
    for x in values:
        exact = float(total) + x
        nearest = np.float32(exact)
        total = np.nextafter(nearest, np.float32(0)) if abs(float(nearest)) > abs(exact) else nearest
    return float(total)


def test_a_chopped_sum_that_loses_almost_an_ulp_every_time_reaches_the_bound_but_never_passes_it() -> None:
    """1 plus 4095 terms just under one ULP of 1: chopping drops each, so the error is almost 4095 ULPs; the bound
    (gamma_n with u = 2^-23) is met within 1 %: it could not be tighter, and it holds."""
    n, under = 4096, 2.0**-23 * (1 - 2.0**-10)
    values = [1.0] + [under] * (n - 1)
    error = abs(chopped_sum(values) - math.fsum(values))
    allowed = sdc.tolerance("sum", "fp32", n).allowed(math.fsum(abs(v) for v in values), math.fsum(values))
    assert 0.99 < error / allowed <= 1.0, error / allowed


def test_a_product_made_in_a_lower_precision_than_it_claims_breaks_the_bound() -> None:
    """An fp32 GEMM whose inputs were quietly rounded to bf16 (a GPU taking a shortcut it was not allowed) is beyond
    the fp32 bound; the same product made in fp32 is well within it."""
    a, b = ranks.operands("gemm", 256, sdc.SEED)
    honest = used("gemm", "fp32", [a, b])
    cheat = (a.to(torch.bfloat16).float() @ b.to(torch.bfloat16).float()).double()
    expected, allowed, _ = ranks.reference("gemm", "fp32", [a.float(), b.float()], torch.arange(256))
    assert honest < 0.1 and bool(((cheat - expected).abs() > allowed).any())


@pytest.mark.parametrize(
    "a, b, storage, distance",
    [
        (0x00000000, 0x80000000, "fp32", 0),  # +0 and -0
        (0x3F800000, 0x3F800001, "fp32", 1),  # 1.0 and the next float
        (0x00000001, 0x80000001, "fp32", 2),  # the smallest subnormals either side of zero
        (0x3F800000, 0x40000000, "fp32", 2**23),  # 1.0 and 2.0: the lowest exponent bit
        (-0x3F80, 0x3F80, "bf16", 0x4080 + 0x3F80),  # -4.0 (0xC080, read as an int16) and 1.0 in bf16
        (0x3C00, 0x3C01, "fp16", 1),
    ],
)
def test_ulps_count_representable_values_between_two_bit_patterns(a: int, b: int, storage: str, distance: int) -> None:
    assert sdc.ulps(a, b, storage) == distance == sdc.ulps(b, a, storage)


def test_gamma_and_the_tolerance_of_each_precision() -> None:
    assert sdc.gamma(4096, 2.0**-23) == pytest.approx(4096 * 2.0**-23 / (1 - 4096 * 2.0**-23))
    assert sdc.gamma(2**23, 2.0**-23) == math.inf
    bf16 = sdc.tolerance("gemm", "bf16", 4096)
    assert (bf16.on_value, bf16.absolute) == (2.0**-7, 2.0**-133)
    tf32, fp32 = sdc.tolerance("gemm", "tf32", 4096), sdc.tolerance("gemm", "fp32", 4096)
    assert tf32.on_scale > fp32.on_scale + 2 * 2.0**-10 > 0 and fp32.on_value == 0
    assert sdc.tolerance("chain", "fp32", 1).on_value == pytest.approx(16 * 2.0**-23, rel=1e-5)


# --- the verdicts, on fixtures of the ranks' data ------------------------------------------------------------------
KIND = {"device": "NVIDIA H100 80GB HBM3", "capability": "9.0", "sms": "132", "torch": "2.15.0", "cuda": "13.2"}
GOOD, BAD, OTHER = "1b0161cf9835fe4c", "8b8570c09881f0d9", "42f6b3ab3a75fcb5"


def rank(r: int, digest: str = GOOD, kind: dict[str, str] = KIND, **case: Any) -> dict[str, Any]:
    """A rank's data with one case (gemm-bf16) as the worker returns it."""
    return {"rank": r, "kind": kind, "uuid": f"GPU-{r}", "cases": [{"case": "gemm-bf16", "repeats": 5,
            "shape": [4096, 4096], "digest": digest, **case}]}  # fmt: skip


def peer(source: int, got_within: bool = True, expected_within: bool = True) -> dict[str, Any]:
    within = {"got": got_within, "expected": expected_within}
    return {"source": source, "index": 4097, "got": 1.5, "expected": 1.25, "ulps": 32, "within": within}


def label(r: int) -> str:
    return f"GPU {r}"


def test_the_odd_one_of_a_majority_is_blamed_with_its_digest_and_element() -> None:
    judged = sdc.judge([rank(0), rank(1, BAD, peer=peer(0)), rank(2)], label)
    [found] = judged.findings
    assert (found.rank, found.case, found.sure) == (1, "gemm-bf16", True)
    assert found.text == (
        "gemm-bf16 (repeat 0): not the bits of the majority of its peers (GPUs 0 and 2; digest "
        f"{BAD}, theirs {GOOD}), first at element [1, 1] (1.5 vs GPU 0's 1.25, 32 ULPs)"
    )


@pytest.mark.parametrize(
    "within, blamed",
    [((False, True), [1]), ((True, False), [0]), ((True, True), [])],
    ids=["own-value-beyond", "source-beyond", "both-within"],
)
def test_two_that_disagree_are_told_apart_by_the_reference_where_it_can(
    within: tuple[bool, bool], blamed: list
) -> None:
    judged = sdc.judge([rank(0), rank(1, BAD, peer=peer(0, *within))], label)
    assert [f.rank for f in judged.findings if f.sure] == blamed
    unsure = [f.rank for f in judged.findings if not f.sure]
    assert unsure == ([] if blamed else [0, 1])
    result = check.judge_node([(m, {"index": m["rank"], "uuid": m["uuid"]}) for m in [rank(0), rank(1, BAD,
                              peer=peer(0, *within))]], LEAN)  # fmt: skip
    assert result.status == Status.FAIL, "a disagreement fails the node even where it cannot say which GPU"
    expected = [Status.FAIL if r in blamed else Status.WARN if not blamed else Status.PASS for r in (0, 1)]
    assert [row.status for row in result.rows] == expected
    assert result.remediation.commands[0].startswith("CUDA_VISIBLE_DEVICES=GPU-")


def test_devices_of_another_kind_are_not_compared_and_a_lone_one_says_so() -> None:
    other = {**KIND, "device": "NVIDIA A100-SXM4-80GB", "sms": "108"}
    judged = sdc.judge([rank(0), rank(1), rank(2, OTHER, kind=other)], label)
    assert judged.findings == []
    assert judged.notes[0].startswith("2 kinds of device or software, each compared within its kind only")
    assert "NVIDIA A100-SXM4-80GB 9.0 108: GPU 2" in judged.notes[0]
    assert judged.notes[1] == "GPU 2: no peer of its kind to compare its bits with"


def test_repeats_and_reference_findings_and_what_was_not_judged() -> None:
    beyond = {"index": 3, "got": 2.0, "expected": 1.0, "allowed": 0.01, "ulps": 128}
    data = [
        rank(0, repeat_diff={"repeat": 3, "index": 4096, "got": 1.0, "expected": 0.5, "ulps": 128}),
        rank(1, reference={"share": 0.4, "beyond": beyond}),
        {"rank": 2, "kind": KIND, "cases": [{"case": "gemm-bf16", "repeats": 5, "not_judged": "no native bf16"}]},
    ]
    judged = sdc.judge(data, label)
    texts = {f.rank: f.text for f in judged.findings}
    assert texts[0] == "gemm-bf16: repeat 3 differs from repeat 0, first at element [1, 0] (1 vs 0.5, 128 ULPs)"
    assert texts[1].startswith("gemm-bf16 (repeat 0): element [0, 3] is 2, the fp64 reference 1: off by 1, beyond")
    assert judged.notes == ["gemm-bf16 on GPU 2 (no native bf16)"]


def test_data_that_is_no_result_is_said_and_never_crashes_the_judge() -> None:
    hostile = {**rank(2), "cases": [{"case": "gemm-bf16", "digest": "\x1b]52;c;x\x07", "shape": [1]}, "junk"]}
    judged = sdc.judge([rank(0), rank(1), hostile, "nonsense", {"rank": "3"}], label)
    assert judged.findings == [] and all("\x1b" not in note for note in judged.notes)


def test_a_node_named_by_the_majority_is_drained_and_one_of_two_that_disagree_is_not() -> None:
    nodes = {0: "node-0", 1: "node-1", 2: "node-2"}
    result = check.judge_nodes([rank(0), rank(1), rank(2, BAD, peer=peer(0))], nodes, LEAN)
    assert [row.status for row in result.rows] == [Status.PASS, Status.PASS, Status.FAIL]
    assert result.rows[2].summary.startswith("rank 2: gemm-bf16 (repeat 0): not the bits of the majority")
    assert (
        result.remediation.commands[0] == 'scontrol update NodeName=node-2 State=DRAIN Reason="gpudoctor: cluster.sdc"'
    )
    assert result.remediation.commands[1].endswith("--case gemm-bf16 --repeats 20 --n 128 --seed 2026  # on node-2")
    two = check.judge_nodes([rank(0), rank(1, BAD, peer=peer(0))], {0: "node-0", 1: "node-1"}, LEAN)
    assert (two.status, [row.status for row in two.rows]) == (Status.FAIL, [Status.WARN, Status.WARN])
    assert not any("scontrol" in c for c in two.remediation.commands), "named, not drained: nothing tells which"


def test_a_node_name_that_is_no_word_never_reaches_a_command() -> None:
    result = check.judge_nodes([rank(0), rank(1), rank(2, BAD, peer=peer(0))], {0: "a", 1: "b", 2: "-rf;x"}, LEAN)
    assert result.status == Status.FAIL and result.remediation.commands == []
    assert "no command given" in result.remediation.why


def test_the_ranks_plan_which_output_each_disagreeing_rank_is_compared_with() -> None:
    table = [[7, 5], [7, 9], [7, 5], [8, 9], [8, 4], [7, 0]]  # [kind, digest]; rank 5 did not run it
    assert sdc.sources(table, 1) == [(0, [1]), (3, [4])]
    assert sdc.unravel(4097, [4096, 4096]) == [1, 1]
