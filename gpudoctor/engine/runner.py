"""The checks' side of the engine: selection, prerequisites, running each check. It knows how to run checks
and no check by name (a check declares what it needs; the registry orders them); checks see only
`gpudoctor.api`."""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpudoctor.context import CheckContext, Observer, Options
from gpudoctor.declarations import LEVELS
from gpudoctor.errors import InputError
from gpudoctor.facts.schema import SOURCES
from gpudoctor.model import Result, Status
from gpudoctor.registry import CheckSpec
from gpudoctor.vetting import NotAResult, vetted
from gpudoctor.workloads import guard

if TYPE_CHECKING:  # a cluster run's session: the cluster package is imported only where one runs
    from gpudoctor.cluster.context import ClusterContext


class SelectionError(InputError):
    """--only/--skip named a check or area that does not exist."""


def sources_for(specs: list[CheckSpec]) -> set[str]:
    """The fact sources the selected checks need: nothing else is gathered."""
    return set().union(*(spec.sources for spec in specs)) if specs else set()


def select(specs: list[CheckSpec], options: Options) -> list[CheckSpec]:
    """Level filter (or --only, which runs what it names at any level), then --skip; quick checks first."""
    for pattern in [*options.only, *options.skip]:
        _require_known(pattern, specs)
    if options.only:
        chosen = [s for s in specs if any(_matches(s, p) for p in options.only)]
    else:
        chosen = [s for s in specs if LEVELS.index(s.level) <= LEVELS.index(options.level)]
    chosen = [s for s in chosen if not any(_matches(s, p) for p in options.skip)]
    return sorted(chosen, key=lambda s: LEVELS.index(s.level))


def _matches(spec: CheckSpec, pattern: str) -> bool:
    return spec.id == pattern or spec.area == pattern


def _require_known(pattern: str, specs: list[CheckSpec]) -> None:
    names = {s.id for s in specs} | {s.area for s in specs}
    if pattern not in names:
        import difflib  # only for a name that is not there

        close = difflib.get_close_matches(pattern, sorted(names), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `gpudoctor list` shows them all"
        raise SelectionError(f"no check or area named {pattern!r}{hint}")


def unmet(spec: CheckSpec, ctx: CheckContext) -> str | None:
    """Why a check cannot run here, or None. A failed prerequisite is a skip with that reason."""
    needs = set(spec.needs)
    if ctx.options.pasted_only and LEVELS.index(spec.level) > LEVELS.index(ctx.options.level):
        return f"the paste points here, but this check runs at --level {spec.level} (this run: {ctx.options.level})"
    if "cluster" in needs and ctx.cluster is None:
        return "not in cluster mode: run one gpudoctor per node under torchrun or srun"
    if "live" in needs and ctx.options.offline:
        return "judging a snapshot offline: workloads do not run"
    if "benchmarks" in needs and not ctx.facts.get("benchmarks"):
        return "no benchmark output to judge: gpudoctor check --from <nccl-tests, nvbandwidth or dcgmi diag output>"
    missing = _not_gathered(spec, ctx)
    if missing:
        return ctx.not_gathered(missing)
    if "nvml" in needs and ctx.nvml.get("status") != "ok":
        return f"NVML is not available ({ctx.nvml.get('status')}); see driver.nvml"
    if "torch" in needs and not ctx.torch.get("importable"):
        return "torch does not import; see torch.import"
    if "gpu" in needs:
        if ctx.options.device == "cpu":
            return "--device cpu was given"
        if ctx.nvml.get("status") != "ok":
            return f"NVML is not available ({ctx.nvml.get('status')}); see driver.nvml"
        if "live" in needs and ctx.device != "cuda":
            return "torch cannot use the GPUs; see torch.cuda-available"
        return _too_few_gpus(spec, ctx)
    return None


def _too_few_gpus(spec: CheckSpec, ctx: CheckContext) -> str | None:
    """A workload counts the GPUs torch can use (a CUDA_VISIBLE_DEVICES subset, one MIG slice); a reading
    of NVML counts NVML's."""
    wanted = max(1, spec.min_gpus)
    live = "live" in spec.needs
    found = len(ctx.used_gpus) if live else len(ctx.gpus)
    if found >= wanted:
        return None
    kind = "GPUs torch can use" if live else "GPUs"
    return f"needs at least {wanted} {kind}, found {found}{ctx.hidden_gpus() if live else ''}"


def _not_gathered(spec: CheckSpec, ctx: CheckContext) -> str | None:
    """A source a check needs that these facts do not hold, or its only source when it needs none (judging a
    snapshot or capture offline; a live run gathers every source its checks name)."""
    declared = [s for s in (*spec.needs, *spec.uses) if s in SOURCES]
    missing = [s for s in declared if s not in ctx.gathered]
    needed = [s for s in missing if s in spec.needs]
    if needed:
        return needed[0]
    return missing[0] if missing and len(missing) == len(declared) else None


ProgressHook = Callable[[str, str, str], None]  # ("start" or "done", check id, title)


@dataclass
class Run:
    results: list[Result] = field(default_factory=list)
    interrupted: bool = False
    duration_s: float = 0.0
    observations: list[dict[str, Any]] = field(default_factory=list)  # who used the GPUs around each workload


def run_checks(
    specs: list[CheckSpec],
    facts: dict[str, Any],
    options: Options,
    settings_for: Callable[[CheckSpec], dict[str, Any]],
    hook: ProgressHook | None = None,
    cluster: ClusterContext | None = None,
    observer: Observer | None = None,
) -> Run:
    """Run each check; a check that raises is an `error` row, and Ctrl-C/SIGTERM ends the run cleanly. The
    observer (a fresh one by default) watches the GPUs around every workload; the run keeps what it saw."""
    observer = observer or Observer()
    run = Run(observations=observer.observations)
    started = time.monotonic()
    budget = _budget(options, facts, specs)
    specs = budgeted_order(specs) if options.budget and budget else specs
    for position, spec in enumerate(specs):
        if hook:
            hook("start", spec.id, spec.title)
        ctx = CheckContext(facts, options, settings_for(spec), spec, cluster, observer)
        try:
            results = _within(budget, spec, ctx) if budget and workload(spec) else run_one(spec, ctx)
        except KeyboardInterrupt:
            run.interrupted = True
            run.results += [_skipped(s, "interrupted before it finished") for s in specs[position:]]
            break
        run.results += results
        if hook:
            hook("done", spec.id, spec.title)
    if budget:
        budget.save()
    run.duration_s = time.monotonic() - started
    return run


def workload(spec: CheckSpec) -> bool:
    """A check that runs work on the machine (a workload, a cross-node measurement), not one that judges facts
    (cluster.nodes and cluster.skew judge what the nodes reported: they always run)."""
    return "live" in spec.needs


def budgeted_order(specs: list[CheckSpec]) -> list[CheckSpec]:
    """Under a --budget: the facts' checks first, as declared, then the workloads, the most telling first."""
    from gpudoctor.engine.budget import ordered

    return [s for s in specs if not workload(s)] + ordered([s for s in specs if workload(s)])


def _budget(options: Options, facts: dict[str, Any], specs: list[CheckSpec]) -> Any:
    """The run's budget on a live run: the time --budget gives, else none (every workload whole), its workloads'
    durations learnt either way for the runs that have one."""
    if options.offline or not facts.get("torch"):
        return None
    from gpudoctor.engine.budget import Budget

    torch = facts.get("torch") or {}
    device = options.device if options.device != "auto" else "cuda" if torch.get("device_count") else "cpu"
    beside = (options.baseline or {}).get("path")
    specs = [*specs, *options.budget_after]
    seconds = options.budget or math.inf
    budget = Budget.start(seconds, device, torch.get("import_s"), beside, specs, options.budget_from)
    budget.reserve_s = budget.reserved(tuple(s.id for s in options.budget_after))
    return budget


def _within(budget: Any, spec: CheckSpec, ctx: CheckContext) -> list[Result]:
    """A workload under the budget: skipped where it cannot run or does not fit, else sized to the time left. Its
    results record the share of its work it ran (run_one) and the budget whose time ran out on it, where the
    budget's limit was shorter than its own and it timed out; the diagnosis says what a short run's verdicts are."""
    if unmet(spec, ctx):
        return run_one(spec, ctx)
    across = "cluster" in spec.needs
    if across and ctx.cluster is not None and not ctx.cluster.leader:
        decision = budget.follow()  # rank 0 decides a cross-node check; this node takes part while time is left
    else:
        decision = budget.plan(spec.id, whole=across)  # every node runs the same work: never a share of it
    if decision.skip:
        return [_skipped(spec, decision.skip)]
    own_limit = ctx.timeout_s
    ctx.scale, ctx.limit_s = decision.scale, decision.limit_s
    started = time.monotonic()
    results = run_one(spec, ctx)
    elapsed = time.monotonic() - started
    timed_out = any(r.status == Status.TIMEOUT for r in results)
    budget.learn(spec.id, ctx.work_factor, elapsed * (OVERRAN if timed_out else 1.0))
    if timed_out and decision.limit_s is not None and decision.limit_s < own_limit:
        for result in results:
            result.budget_s = budget.seconds
    return results


OVERRAN = 1.25  # a workload the budget cut took longer than it ran: learnt as a quarter more, at the least


def run_one(spec: CheckSpec, ctx: CheckContext) -> list[Result]:
    started = time.monotonic()
    reason = unmet(spec, ctx)
    if reason:
        results = [_skipped(spec, reason)]
    else:
        try:
            results = vetted(_call(spec, ctx))
        except KeyboardInterrupt:
            raise
        except guard.TimedOut as exc:
            results = [Result(Status.TIMEOUT, str(exc))]
        except guard.Stopped as exc:
            results = [Result(Status.ERROR, f"{spec.id} {exc}")]
        except NotAResult as exc:
            results = [Result(Status.ERROR, f"{spec.id} returned {exc}; a check returns a Result or a list of them")]
        except Exception as exc:
            results = [Result(Status.ERROR, f"the check itself broke: {type(exc).__name__}: {exc}")]
    elapsed = time.monotonic() - started
    for result in results:
        result.check_id = result.check_id or spec.id
        result.title = result.title or spec.title
        result.duration_s = result.duration_s or round(elapsed, 3)
        result.scale = ctx.scale if ctx.scale < 1.0 else None  # how it ran: the runner's, never the check's
        result.budget_s = None
    return results


def _call(spec: CheckSpec, ctx: CheckContext) -> Any:
    """The check's answer. A check that is not gpudoctor's own gets its own copy of the facts (what it changes
    there no other check sees). A quick check, which only judges facts, gets its time limit here; a workload
    has its own, in the process it runs in (ctx.run_isolated), and runs in this thread so that Ctrl-C and
    SIGTERM end that process before the report is written. No check can end gpudoctor (sys.exit, os._exit)."""
    if spec.source != "builtin":
        ctx = dataclasses.replace(ctx, facts=copy.deepcopy(ctx.facts))
    if spec.level == "quick":
        return guard.call(lambda: spec.run(ctx), ctx.timeout_s, spec.id)
    with guard.no_exit():
        return spec.run(ctx)


def _skipped(spec: CheckSpec, reason: str) -> Result:
    return Result(Status.SKIP, reason, title=spec.title, check_id=spec.id)


def broken_plugin_results(broken: list[tuple[str, str]]) -> list[Result]:
    return [
        Result(
            Status.ERROR,
            f"{source} failed to load: {error}",
            aspect=source,
            title="Plugin loads",
            check_id="plugins.load",
        )
        for source, error in broken
    ]
