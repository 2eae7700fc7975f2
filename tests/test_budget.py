"""`--budget SECONDS`: a run plans its workloads to end in time, the most telling first, each sized to the time left
or skipped saying what it would need; a shortened run never gives a false verdict."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers.common import gpudoctor

from gpudoctor import registry
from gpudoctor.diagnosis.shortened import short_run
from gpudoctor.engine import budget as budget_mod
from gpudoctor.engine.budget import Budget, Cost, declared, fit, ordered
from gpudoctor.judging import ddp
from gpudoctor.model import Metric, Result, Row, Status

SPECS = {spec.id: spec for spec in registry.discover(entry_points=False).specs}


def planner(seconds: float, left: float, device: str = "cpu", history: dict | None = None) -> Budget:
    """A budget with `left` seconds to its deadline now, the gateway's import at 2 s, the built-in checks'
    declarations."""
    deadline = time.time() + left + budget_mod.RESERVE_S
    return Budget(seconds, deadline, device, 2.0, history or {}, works=declared(list(SPECS.values())))


def test_a_workload_runs_whole_where_it_fits_sized_where_it_nearly_does_and_is_skipped_saying_why() -> None:
    cost = planner(60, 60).cost("allreduce.bandwidth")
    assert cost == Cost(2.0 * budget_mod.START_SHARE["cpu"] + budget_mod.FIXED_EXTRA_S["cpu"], 6.5)
    whole = planner(60, 60).plan("allreduce.bandwidth")
    assert whole.scale == 1.0 and whole.skip is None
    sized = planner(15, cost.at(0.5) * budget_mod.MARGIN).plan("allreduce.bandwidth")
    assert 0.45 < sized.scale < 0.55 and sized.limit_s == pytest.approx(cost.at(0.5) * budget_mod.MARGIN, abs=0.1)
    skipped = planner(15, 3).plan("allreduce.bandwidth")
    needs = cost.at(budget_mod.MIN_SCALE) * budget_mod.MARGIN
    assert skipped.skip == f"not within the 15 s budget: needs about {needs:.0f} s (3 s left)"


def test_a_cross_node_check_runs_whole_or_not_and_a_follower_takes_part_while_time_is_left() -> None:
    cost = planner(60, 60).cost("cluster.links")
    assert planner(30, cost.at(0.6) * budget_mod.MARGIN).plan("cluster.links", whole=True).skip
    assert planner(30, 10).follow().limit_s == pytest.approx(10, abs=0.1)
    assert "ran out" in planner(30, 0.5).follow().skip


def test_ddp_keeps_enough_steps_for_its_loss_to_fall() -> None:
    cost = planner(60, 60).cost("ddp.train")
    assert planner(20, cost.at(0.3) * budget_mod.MARGIN).plan("ddp.train").skip
    params = ddp.resolve(ddp.SETTINGS, "cpu", work_factor=0.1)
    assert params["steps"] == ddp.MIN_STEPS


def test_earlier_runs_at_two_sizes_give_the_fixed_part_and_the_work() -> None:
    assert fit([(1.0, 10.0), (0.5, 7.0), (0.25, 5.5)]) == Cost(pytest.approx(4.0), pytest.approx(6.0))
    assert fit([(1.0, 10.0), (1.0, 11.0)]) is None, "one size gives no line"
    assert fit([(1.0, 5.0), (0.5, 9.0)]) is None, "slower when smaller is noise, not a cost"
    learnt = planner(60, 60, history={"cpu": {"ddp.train": [[1.0, 20.0], [0.5, 12.0]]}})
    assert learnt.cost("ddp.train") == Cost(pytest.approx(4.0), pytest.approx(16.0))


def test_what_a_run_learns_is_kept_beside_the_baseline_and_junk_is_no_history(tmp_path: Path) -> None:
    path = budget_mod.history_path(str(tmp_path / "baseline.json"))
    assert path == tmp_path / budget_mod.HISTORY_NAME
    kept = Budget(15, time.time() + 10, "cpu", 2.0, {}, path)
    for scale, took in [(1.0, 10.0), (0.5, 7.0)] * 4:
        kept.learn("allreduce.bandwidth", scale, took)
    kept.save()
    assert len(json.loads(path.read_text())["cpu"]["allreduce.bandwidth"]) == budget_mod.KEPT_RUNS
    path.write_text('{"cpu": {"allreduce.bandwidth": [["x", 1], [1e9, 2], 7]}}')
    assert Budget(15, 0, "cpu", 2.0, budget_mod.read_history(path))._runs("allreduce.bandwidth") == []
    path.write_text("not json")
    assert budget_mod.read_history(path) == {}


def test_the_most_telling_workloads_come_first() -> None:
    mine = registry.CheckSpec("plugin.mine", "A plugin's workload", "standard", print, needs=("live",))
    names = ["load.concurrent", "ddp.train", "allreduce.bandwidth", "compute.gemm", "p2p.access"]
    assert [spec.id for spec in ordered([SPECS[names[0]], mine, *(SPECS[n] for n in names[1:])])] == [
        "compute.gemm",
        "allreduce.bandwidth",
        "p2p.access",
        "ddp.train",
        "load.concurrent",
        "plugin.mine",
    ]


def test_every_workload_declares_its_cost_and_a_plugin_s_is_planned_without_one() -> None:
    workloads = [spec for spec in SPECS.values() if "live" in spec.needs]
    assert workloads and all(spec.work for spec in workloads), [s.id for s in workloads if not s.work]
    assert len({spec.work.rank for spec in workloads}) == len(workloads), "one place each in the order"
    assert planner(60, 60).cost("plugin.mine").work_s == budget_mod.UNKNOWN_WORK_S
    assert planner(60, 60).least("ddp.train") == 0.5 and planner(60, 60).least("plugin.mine") == budget_mod.MIN_SCALE


def figure(value: float, expected: float) -> Metric:
    return Metric("bf16", value, "TFLOP/s", expected=expected, comparison=">=", reference=expected / 0.85)


def test_a_shortened_run_calls_a_near_miss_unstable_and_a_gross_one_a_failure() -> None:
    near = Result(Status.FAIL, "GPU 0: bf16 600", rows=[Row(Status.FAIL, "bf16 600", index=0, basis="figure",
                                                            metrics=[figure(600.0, 675.0)])])  # fmt: skip
    [said] = short_run([near], 0.4, None)
    assert said.status == Status.WARN and said.summary.startswith("unstable in a shortened run")
    assert said.rows[0].summary.startswith("unstable (40% of its work)") and "--budget" in said.detail
    gross = Result(Status.FAIL, "GPU 0: bf16 263", rows=[Row(Status.FAIL, "bf16 263", index=0, basis="figure",
                                                             metrics=[figure(263.0, 675.0)])])  # fmt: skip
    assert short_run([gross], 0.4, None)[0].status == Status.FAIL, "a third of its figure is no noise"
    wrong = Result(Status.FAIL, "WRONG RESULTS", basis="data")
    assert short_run([wrong], 0.4, None)[0].status == Status.FAIL, "correctness is judged as in a full run"
    loss = Result(Status.FAIL, "loss did not fall (2.4 -> 2.7)", aspect="loss-falls", basis="data")
    assert short_run([loss], 0.5, None)[0].status == Status.WARN
    assert short_run([Result(Status.FAIL, "x", basis="figure")], 1.0, None)[0].status == Status.FAIL


def test_a_workload_the_budget_ran_out_on_is_cut_short_not_failed() -> None:
    [said] = short_run([Result(Status.TIMEOUT, "all ranks stuck in 'all_reduce'")], 1.0, 15.0)
    assert said.status == Status.SKIP and said.summary.startswith("cut short: the 15 s budget ran out")
    assert "all ranks stuck" in said.detail
    assert short_run([Result(Status.TIMEOUT, "hung")], 1.0, None)[0].status == Status.TIMEOUT, "its own limit"


def test_few_settled_steps_leave_ddp_throughput_not_judged() -> None:
    ranks = [{"rank": r, "step_s": [0.3] * 4, "peak_mib": 100.0} for r in range(2)]
    expected = ddp.expect.Expectation(1000.0, "baseline")
    result = ddp._throughput(ranks, {"batch_size": 8}, "cuda", expected, 0.75, "run")
    assert result.status == Status.SKIP and "only 4 settled steps" in result.summary


NEEDS = re.compile(r"not within the 12 s budget: needs about (\d+) s \((-?\d+) s left\)")


def test_standard_level_plans_its_workloads_within_its_budget_with_every_check_judged_or_named(tmp_path: Path) -> None:
    """What the engine decided, whatever the machine's load: a workload that ran finished inside the budget (it
    was planned within the time left, and ran to its end); one left out says what it would need against what was
    left, or that the budget cut it short; none fails or times out because of the budget. The whole process's
    time against the budget is bench/budget.py's (docs/BENCHMARKS.md)."""
    budget = 12.0
    proc = gpudoctor("check", "--level", "standard", "--budget", str(budget), "--json",
                     env={"XDG_STATE_HOME": str(tmp_path)}, timeout=300)  # fmt: skip
    checks = json.loads(proc.stdout)["checks"]
    workloads = [c for c in checks if c["check_id"] in ("allreduce.bandwidth", "ddp.train")]
    assert workloads and all(c["status"] in ("pass", "skip", "warn") for c in workloads), workloads
    ran = [c for c in workloads if c["status"] != "skip"]
    assert all(0 < c["duration_s"] < budget for c in ran), ran
    left_out = [c for c in workloads if c["status"] == "skip"]
    for skipped in left_out:
        needs = NEEDS.fullmatch(skipped["summary"])
        cut = skipped["summary"].startswith("cut short: the 12 s budget ran out")
        assert cut or (needs and int(needs[1]) >= int(needs[2])), skipped["summary"]
    assert (tmp_path / "gpudoctor" / budget_mod.HISTORY_NAME).exists() or len(left_out) == len(workloads)


def test_a_budget_is_a_positive_number_on_the_command_line_and_in_the_config(tmp_path: Path) -> None:
    assert gpudoctor("check", "--budget", "-3").returncode == 2
    config = tmp_path / "site.toml"
    config.write_text('budget = "soon"\n')
    proc = gpudoctor("check", "--config", str(config))
    assert proc.returncode == 2 and "budget" in proc.stderr
