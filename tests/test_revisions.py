"""The diagnosis is the only place a result is rewritten after its check returned it (issue 48): the runner records
how a check ran (the share of its work a --budget left it, the budget that ran out on it) and names no feature; the
diagnosis's revisions (gpudoctor/diagnosis/revisions.py) join a paste's evidence and give a shortened run's verdicts.
A node of a cluster run builds its report twice from the same results, so every revision is idempotent. No module
of gpudoctor/ reaches up into a check, and every check id the diagnosis names is a check."""

from __future__ import annotations

import ast
import copy
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.common import PASTES

from gpudoctor import paste, registry
from gpudoctor.config import Config
from gpudoctor.context import CheckContext, Options
from gpudoctor.diagnosis import Evidence, diagnose
from gpudoctor.diagnosis.revisions import REVISIONS
from gpudoctor.engine.budget import Decision
from gpudoctor.engine.planning import Plan
from gpudoctor.engine.report import Started, report
from gpudoctor.engine.runner import _within, run_checks, select
from gpudoctor.model import Metric, Result, Row, Status
from gpudoctor.paste.inputs import load

SOURCE = Path(registry.__file__).parent
CHECKS = SOURCE / "checks"  # where the wheel installs checks/: the check modules themselves, not core
SPECS = registry.discover(entry_points=False).specs
DRIVER_TOO_OLD = PASTES / "errors" / "driver-too-old-found-11040-runtimeerror-with-smi-header.txt"
MIXED = PASTES / "written" / "issue-body-driver-470-torch-cu121-2x3090.md"


def checked(facts: dict[str, Any]) -> list[Result]:
    """Every quick check's results on a paste's facts, as the runner returns them (before the diagnosis)."""
    options = Options(offline=True)
    return run_checks(select(SPECS, options), facts, options, Config().settings).results


def twice(results: list[Result], facts: dict[str, Any], live: bool) -> tuple[list[Any], list[Any]]:
    """The diagnosis over the results in place, then again as a cluster node's second report reads them (a new
    list of the same results): the results each time."""
    diagnose(Evidence(results, facts, live=live))
    once = [r.to_dict() for r in results]
    again = [*results]
    diagnose(Evidence(again, facts, live=live))
    return once, [r.to_dict() for r in again]


@pytest.mark.parametrize("live", [False, True])
@pytest.mark.parametrize("path", [DRIVER_TOO_OLD, MIXED], ids=lambda p: p.stem[:30])
def test_a_pastes_evidence_is_joined_once_however_often_the_run_is_diagnosed(path: Path, live: bool) -> None:
    facts = load(path)
    results = checked(facts)
    assert not any(r.revised_by for r in results), "the runner rewrites nothing"
    once, again = twice(results, facts, live)
    assert once == again
    revised = [r for r in once if "paste-evidence" in r["revised_by"]]
    assert revised and any(r["check_id"] == "torch.cuda-driver" for r in revised), "the owner's verdict has the line"
    assert all(r["check_id"] and r["title"] for r in once), "a result a revision adds carries its check's stamps"


def test_a_node_that_reports_twice_from_the_same_results_gets_the_same_report() -> None:
    """As a node of a cluster run does (engine/cluster_run.py): the second report's causes keep their cure too,
    though the first folded the owner's fix beneath its cause."""
    facts = load(DRIVER_TOO_OLD)
    options = Options(offline=True)
    plan = Plan(options, select(SPECS, options), Config(), facts, f"snapshot:{DRIVER_TOO_OLD.name}", False, [])
    results = checked(facts)
    said = [r.to_dict() for r in results]
    first, second = (report(plan, results, Started(), False).document for _ in range(2))
    assert [r.to_dict() for r in results] == said, "the results given are the checks' own still"
    for document in (first, second):
        del document["duration_s"]
    assert first == second
    cause = first["causes"][0]
    assert cause["id"] == "driver-too-old-for-torch" and cause["remediation"]["commands"], cause


def test_what_the_paste_itself_shows_is_added_once() -> None:
    found = paste.Found(["Nvidia driver version: 470.82.01", "| NVIDIA-SMI 535.54.03  Driver Version: 535.54.03 |"])
    found.fact("nvml.driver_version", "470.82.01", "collect_env", 0)
    found.fact("nvml.driver_version", "535.54.03", "nvidia-smi", 1)
    facts = paste.to_snapshot("p.txt", found)
    once, again = twice(checked(facts), facts, False)
    conflicts = len(facts["paste"]["conflicts"])
    assert once == again and [r["check_id"] for r in once[:conflicts]] == ["paste.conflicts"] * conflicts
    unread = {"paste": {"kinds": [], "signatures": [], "conflicts": []}}
    results = [Result(Status.SKIP, "nothing to judge", check_id="driver.nvml", title="NVML")]
    once, again = twice(results, unread, False)
    assert once == again and [r["check_id"] for r in once] == ["paste.read", "driver.nvml"]


def figure(value: float, expected: float) -> Metric:
    return Metric("bf16", value, "TFLOP/s", expected=expected, comparison=">=", reference=expected / 0.85)


def shortened_run() -> list[Result]:
    """A budgeted run's results as the runner stamps them: a near miss and a loss that rose at 40% of the work, a
    workload the 15 s budget ran out on (with its other result), a whole run."""
    row = Row(Status.FAIL, "bf16 600", index=0, basis="figure", metrics=[figure(600.0, 675.0)])
    near = Result(Status.FAIL, "GPU 0: bf16 600", check_id="compute.gemm", scale=0.4, rows=[row])
    loss = Result(Status.FAIL, "loss did not fall", check_id="ddp.train", aspect="loss-falls", basis="data", scale=0.4)
    wrong = Result(Status.FAIL, "wrong results", check_id="ddp.train", aspect="finite", basis="data", scale=0.4)
    cut = Result(Status.TIMEOUT, "all ranks stuck in 'all_reduce'", check_id="allreduce.bandwidth", budget_s=15.0)
    beside = Result(Status.PASS, "ranks agree", check_id="allreduce.bandwidth", aspect="data", budget_s=15.0)
    whole = Result(Status.FAIL, "GPU 1: bf16 500", check_id="memory.test", basis="figure")
    return [near, loss, wrong, cut, beside, whole]


def test_a_shortened_runs_verdicts_are_given_once_however_often_the_run_is_diagnosed() -> None:
    results = shortened_run()
    once, again = twice(results, {}, True)
    assert once == again
    near, loss, wrong, cut, beside, whole = once
    assert near["status"] == "warn" and near["summary"].startswith("unstable in a shortened run")
    assert near["detail"].count("--budget") == 1 and near["revised_by"] == ["short-run"]
    assert loss["status"] == "warn" and wrong["status"] == "fail", "correctness is judged as in a full run"
    assert cut["status"] == "skip" and cut["summary"].startswith("cut short: the 15 s budget ran out")
    assert beside["status"] == "pass" and not beside["revised_by"]
    assert whole["status"] == "fail" and not whole["revised_by"], "a whole run is judged as it is"


class Spent:
    """A budget that leaves a workload 40% of its work and 5 s, and whose whole is 15 s."""

    seconds = 15.0

    def plan(self, check_id: str, whole: bool = False) -> Decision:
        return Decision(0.4, limit_s=5.0)

    def learn(self, check_id: str, scale: float, duration_s: float) -> None:
        self.learnt = (check_id, scale)


def workload(answer: Result) -> registry.CheckSpec:
    return registry.CheckSpec("compute.gemm", "GEMM", "standard", lambda ctx: copy.deepcopy(answer))


def test_the_runner_records_how_a_workload_ran_and_rewrites_nothing() -> None:
    options = Options(budget=15.0)
    hung = workload(Result(Status.TIMEOUT, "stuck in all_reduce"))
    [result] = _within(Spent(), hung, CheckContext({}, options, {}, hung))
    assert (result.status, result.scale, result.budget_s) == (Status.TIMEOUT, 0.4, 15.0)
    diagnose(Evidence([result], {}))
    assert result.status == Status.SKIP and result.summary.startswith("cut short: the 15 s budget ran out")
    near = workload(Result(Status.FAIL, "bf16 600", basis="figure", metrics=[figure(600.0, 675.0)]))
    [result] = _within(Spent(), near, CheckContext({}, options, {}, near))
    assert (result.status, result.scale, result.budget_s) == (Status.FAIL, 0.4, None)
    forged = workload(Result(Status.FAIL, "bf16 600", basis="figure", scale=0.1, budget_s=1.0))
    [result] = run_checks([forged], {}, Options(offline=True), lambda spec: {}).results
    assert (result.scale, result.budget_s) == (None, None), "how it ran is the runner's to say, not the check's"


def test_every_revision_is_in_the_report_schema_description() -> None:
    from gpudoctor.report.document import schema

    said = schema()["$defs"]["result"]["properties"]["revised_by"]["description"]
    assert all(f"({revision.id})" in said for revision in REVISIONS)


def _imports(tree: ast.Module) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


def test_no_module_of_gpudoctor_imports_a_check_but_discovery() -> None:
    """Core never reaches up into a check: an owner's judge a paste's cure needs lives in gpudoctor/judging/. Only
    discovery walks the checks' package: registry.py, and declarations.py, which reads their declarations."""
    found = {
        f"{path.relative_to(SOURCE)}: {name}"
        for path in SOURCE.rglob("*.py")
        if path.name not in ("registry.py", "declarations.py") and CHECKS not in path.parents
        for name in _imports(ast.parse(path.read_text()))
        if name == "gpudoctor.checks" or name.startswith("gpudoctor.checks.")
    }
    assert not found


CHECK_ID = re.compile(r"([a-z0-9]+)\.([a-z0-9-]+)(?::[a-z0-9-]+)?")


def test_every_check_id_the_diagnosis_names_is_a_check() -> None:
    """A string of the diagnosis shaped `area.name` (or `area.name:aspect`) in a check area names a check that
    exists: a rule or revision over a renamed check would silently never fire."""
    areas, ids = {s.area for s in SPECS}, {s.id for s in SPECS}
    named = {
        node.value
        for path in (SOURCE / "diagnosis").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    checks = {m.group(1) + "." + m.group(2) for v in named if (m := CHECK_ID.fullmatch(v)) and m.group(1) in areas}
    assert len(checks) > 20, sorted(checks)
    assert checks <= ids, sorted(checks - ids)


def test_the_loss_a_short_run_softens_is_named_by_the_ddp_judge_that_gives_it() -> None:
    from gpudoctor.diagnosis import shortened
    from gpudoctor.judging import ddp

    assert shortened.LOSS_FALLS is ddp.LOSS_FALLS, "one name, the judge's, not a second string of the same text"
    rose = ddp._loss([2.4, 2.5, 2.6, 2.7], 0.1, "a shortened run")
    assert rose.status == Status.FAIL and rose.aspect == ddp.LOSS_FALLS
    assert shortened.short_run([rose], 0.4, None)[0].status == Status.WARN
