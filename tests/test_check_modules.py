"""Check modules hold one life each: the declaration and its pure judges in checks/*.py (no torch, no other
check), the code that runs in a workload's child processes in checks/ranks/, named by one style of target;
the judges several checks share in gpudoctor/judging/. And the one helper for a workload that came back as a
Result instead of its data."""

from __future__ import annotations

import ast
import importlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.clustersim import FRACTIONS, Cluster
from helpers.common import ROOT

from gpudoctor.context import CheckContext
from gpudoctor.judging import pairs
from gpudoctor.model import Result, Status

CHECKS = ROOT / "checks"
CHECK_MODULES = sorted(p for p in CHECKS.glob("*.py") if p.name != "__init__.py")
RANK_MODULES = sorted(p for p in (CHECKS / "ranks").glob("*.py") if p.name != "__init__.py")
WORKLOAD_CALLS = {"launch", "run_isolated", "run_across"}
# The one style: the full module path of a rank module, a colon, the function.
TARGET_STYLE = re.compile(r"gpudoctor\.checks\.ranks\.[a-z0-9_]+:[a-z0-9_]+")
LOOKS_LIKE_TARGET = re.compile(r"[\w.]+\.[\w.]+:\w+")
NO_TORCH = """
import importlib, json, pkgutil, sys
import gpudoctor.checks
from gpudoctor.registry import discover

names = [m.name for m in pkgutil.iter_modules(gpudoctor.checks.__path__)]
for name in names:
    importlib.import_module(f"gpudoctor.checks.{name}")
found = discover(entry_points=False).specs
print(json.dumps({"modules": names, "checks": len(found),
                  "heavy": sorted(m for m in ("torch", "torchvision", "pynvml") if m in sys.modules)}))
"""


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _imported(tree: ast.Module) -> list[tuple[str, int]]:
    """Every module imported anywhere in the file (inside functions too), with its relative level."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
    return found


def _targets(tree: ast.Module) -> list[str]:
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and LOOKS_LIKE_TARGET.fullmatch(node.value)
    ]


def test_importing_every_check_module_and_discovering_leaves_torch_and_pynvml_unloaded() -> None:
    """In a fresh interpreter: every module of the checks package (the ranks package too, which discovery walks
    past) and the discovery of every check load neither torch, torchvision nor NVML's bindings."""
    proc = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    assert {"allreduce", "ddp", "cluster", "ranks"} <= set(seen["modules"]) and seen["checks"] > 40
    assert seen["heavy"] == [], f"imported by a check module or discovery: {seen['heavy']}"


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: p.name)
def test_check_modules_never_import_torch_even_inside_functions(path: Path) -> None:
    heavy = [name for name, _ in _imported(_tree(path)) if name.split(".")[0] in ("torch", "torchvision")]
    assert not heavy, f"{path.name} imports {heavy}: rank-side code belongs in checks/ranks/{path.name}"


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: p.name)
def test_check_modules_import_no_other_check(path: Path) -> None:
    """Not a sibling (relative or absolute), not a rank module: a worker is named by its target string, and
    what two checks share lives in gpudoctor/judging/."""
    others = [
        f"{'.' * level}{name}"
        for name, level in _imported(_tree(path))
        if level or name == "gpudoctor.checks" or name.startswith("gpudoctor.checks.")
    ]
    assert not others, f"{path.name} imports {others}"


@pytest.mark.parametrize("path", RANK_MODULES, ids=lambda p: p.name)
def test_rank_modules_import_torch_at_the_top(path: Path) -> None:
    """Where torch belongs: imported once, at the top, not again inside each function."""
    tree = _tree(path)
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    inside = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        and node not in top
        and any(name.split(".")[0] == "torch" for name, _ in _imported(ast.Module(body=[node], type_ignores=[])))
    ]
    assert any(name == "torch" for name, _ in _imported(ast.Module(body=top, type_ignores=[]))), path.name
    assert not inside, f"{path.name}: torch imported inside functions, lines {inside}"


def test_every_worker_target_follows_the_one_style_and_resolves() -> None:
    """Every target a check names (launch, run_isolated, run_across) is a literal
    "gpudoctor.checks.ranks.<module>:<function>" of a function that exists; none is formatted at run time."""
    targets = [(path.name, target) for path in CHECK_MODULES for target in _targets(_tree(path))]
    assert len({t for _, t in targets}) >= 10, targets
    for name, target in targets:
        assert TARGET_STYLE.fullmatch(target), f"{name}: {target!r} is not gpudoctor.checks.ranks.<module>:<function>"
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function, None)), f"{name}: {target} not found"


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: p.name)
def test_workload_calls_name_their_worker_without_formatting(path: Path) -> None:
    calls = [
        node
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WORKLOAD_CALLS
    ]
    for call in calls:
        first = call.args[0]
        assert isinstance(first, ast.Constant | ast.Name | ast.Attribute), (
            f"{path.name}:{call.lineno}: the worker is built at run time ({ast.unparse(first)})"
        )


@pytest.mark.parametrize("outcome", [[], {}, 0, None, [{"rank": 0}], {"gpus": []}])
def test_a_workload_that_returned_data_has_not_failed(outcome: Any) -> None:
    """Empty data is data: only a Result says the workload hung, crashed or raised."""
    assert CheckContext.failed(outcome) is None


def test_a_workload_that_came_back_as_a_result_has_failed() -> None:
    hung = Result(Status.TIMEOUT, "workload did not finish within its 5 s limit")
    assert CheckContext.failed(hung) is hung


# --- the shared pair judge: a first look over every node, its suspects re-tested through the caller ------
def _outcome(transfers: list[dict[str, Any]], n: int, wrong: dict[int, dict[str, int]] | None = None) -> Any:
    """What run_across gives rank 0 for a pair workload: one rank per node, each with what it sent."""
    sizes = {f"{a}-{b}": 1 << 20 for a in range(n) for b in range(a + 1, n)}
    ranks = [
        SimpleNamespace(
            rank=node,
            data={
                "node": node,
                "sent": [t for t in transfers if t["src"] == node],
                "wrong": (wrong or {}).get(node, {}),
                "sizes": sizes,
            },
        )
        for node in range(n)
    ]
    return SimpleNamespace(members=[SimpleNamespace(rank=i, name=f"n{i}") for i in range(n)], ranks=ranks)


def test_the_pair_judge_retests_suspects_through_the_callers_workload() -> None:
    cluster = Cluster(6, slow_nodes={3: 0.3})
    rng = random.Random(1)
    first = _outcome(cluster.measure(pairs.neighbour_rounds(list(range(6))), rng), 6)
    plans: list[dict[str, Any]] = []

    def again(plan: dict[str, Any]) -> Any:
        plans.append(plan)
        return _outcome(cluster.measure(plan["rounds"], rng, plan["passes"]), 6)

    results = pairs.confirmed_pairs(first, again, FRACTIONS, (None, 0.0), "transfers")
    [plan] = plans
    assert plan["passes"] == pairs.RETEST_PASSES and any(3 in pair for r in plan["rounds"] for pair in r)
    assert set(plan["pair_sizes"]) == {f"{min(a, b)}-{max(a, b)}" for r in plan["rounds"] for a, b in r}
    row = next(r for r in results[0].rows if r.node == "n3")
    assert (row.status, row.confirmed) == (Status.FAIL, True)
    assert {m.labels["stage"] for m in results[0].metrics} == {"first", "retest"}


def test_a_retest_that_fails_leaves_the_suspect_unconfirmed_and_says_why() -> None:
    cluster = Cluster(6, slow_nodes={3: 0.3})
    first = _outcome(cluster.measure(pairs.neighbour_rounds(list(range(6))), random.Random(1)), 6)
    lost = Result(Status.ERROR, "n5 lost during the re-test")
    results = pairs.confirmed_pairs(first, lambda plan: lost, FRACTIONS, (None, 0.0), "transfers")
    assert results[-1] is lost
    row = next(r for r in results[0].rows if r.node == "n3")
    assert (row.status, row.confirmed) == (Status.WARN, False)


def test_corrupted_deliveries_fail_at_once_without_a_retest() -> None:
    first = _outcome(Cluster(4).measure(pairs.neighbour_rounds(list(range(4))), random.Random(2)), 4, {2: {"1": 3}})
    result = pairs.confirmed_pairs(first, lambda plan: pytest.fail("re-tested"), FRACTIONS, (None, 0.0), "transfers")
    assert result.status == Status.FAIL and result.summary == "data arrived corrupted on n1 -> n2"
