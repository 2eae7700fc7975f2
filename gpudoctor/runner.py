"""Selection, prerequisites and running: knows how to run checks, knows no check by name."""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.expect import Expectation
from gpudoctor.facts.identity import with_gpus
from gpudoctor.facts.nvml import usable
from gpudoctor.isolate import Outcome, run_isolated
from gpudoctor.launch import Fault, LaunchResult, launch
from gpudoctor.model import Remediation, Result, Status
from gpudoctor.registry import LEVELS, CheckSpec

DEFAULT_CPU_RANKS = 2


class SelectionError(ValueError):
    """--only/--skip named a check or area that does not exist."""


@dataclass
class Options:
    level: str = "quick"
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    timeout: float | None = None
    expect_gpus: int | None = None
    device: str = "auto"
    offline: bool = False
    baseline: dict[str, Any] | None = None
    fault: Fault | None = None


@dataclass
class CheckContext:
    """What a check sees: the node's facts, the run's options and its own settings."""

    facts: dict[str, Any]
    options: Options
    settings: dict[str, Any]
    spec: CheckSpec

    @property
    def nvml(self) -> dict[str, Any]:
        return self.facts["nvml"]

    @property
    def torch(self) -> dict[str, Any]:
        return self.facts["torch"]

    @property
    def system(self) -> dict[str, Any]:
        return self.facts["system"]

    @property
    def timeout_s(self) -> float:
        return float(self.settings.get("timeout") or self.options.timeout or self.spec.timeout_s)

    @property
    def device(self) -> str:
        """cuda where torch sees GPUs (or --device cuda), else cpu: gloo runs the same path for real."""
        if self.options.device != "auto":
            return self.options.device
        return "cuda" if self.torch.get("cuda_available") and self.torch.get("device_count") else "cpu"

    @property
    def world_size(self) -> int:
        if self.device == "cuda":
            return int(self.torch.get("device_count") or 0)
        return int(self.settings.get("cpu_ranks", DEFAULT_CPU_RANKS))

    def with_gpus(self, measured: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Per-device measurements (keyed by torch's `cuda_index`) paired with the physical GPU's facts."""
        return with_gpus(measured, self.torch.get("devices") or [], live_gpus(self.facts))

    def baseline(self, figure: str) -> Expectation | None:
        """This check's `figure` from the saved baseline, passing at its `baseline_tolerance`, or None."""
        saved = self.options.baseline or {}
        value = saved.get("figures", {}).get(f"{self.spec.id}:{figure}")
        tolerance = self.settings.get("baseline_tolerance", 0.9)
        return Expectation(float(value), f"baseline {saved['path']}", floor=tolerance) if value else None

    def launch(self, worker: str, params: dict[str, Any], world_size: int | None = None) -> LaunchResult:
        """One rank per GPU (or `cpu_ranks` gloo ranks on CPU) running `worker(ctx)`, under this check's timeout."""
        backend = "nccl" if self.device == "cuda" else "gloo"
        return launch(worker, world_size or self.world_size, backend, params, self.timeout_s, self.options.fault)

    def run_isolated(self, target: str, payload: dict[str, Any]) -> Outcome:
        """`target(payload)` in its own process session, killed with all it started at this check's timeout."""
        return run_isolated(target, payload, self.timeout_s)


def isolated_failure(check_id: str, outcome: Outcome) -> Result:
    """A workload that hung, crashed or raised, as a result naming where it was."""
    status = Status.TIMEOUT if outcome.kind == "timeout" else Status.ERROR
    where = "; ".join(f"{name}: {phase}" for name, phase in outcome.progress.items()) or "before it reported progress"
    detail = outcome.stderr_tail.strip().splitlines()[-1][:200] if outcome.stderr_tail.strip() else ""
    summary = f"workload {outcome.message} ({where})" + (f": {detail}" if detail and outcome.kind != "timeout" else "")
    return Result(check_id, status, summary)


def launch_failure(check_id: str, outcome: LaunchResult) -> Result:
    """A distributed workload whose rank hung or died, as a result naming the rank and the operation."""
    status = Status.TIMEOUT if outcome.status == "timeout" else Status.ERROR
    return Result(
        check_id,
        status,
        outcome.message,
        remediation=Remediation(
            "A rank that hangs or dies in a collective is what a training job would hit too.",
            [f"NCCL_DEBUG=WARN gpudoctor check --only {check_id}", "sudo dmesg | grep -i xid"],
        ),
    )


def live_gpus(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs this process can read: neither lost nor hidden from it."""
    return [g for g in facts["nvml"].get("gpus", []) if usable(g)]


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
        close = difflib.get_close_matches(pattern, sorted(names), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `gpudoctor list` shows them all"
        raise SelectionError(f"no check or area named {pattern!r}{hint}")


def unmet(spec: CheckSpec, ctx: CheckContext) -> str | None:
    """Why a check cannot run here, or None. A failed prerequisite is a skip with that reason."""
    needs = set(spec.needs)
    if "live" in needs and ctx.options.offline:
        return "judging a snapshot offline: workloads do not run"
    if "nvml" in needs and ctx.nvml.get("status") != "ok":
        return f"NVML is not available ({ctx.nvml.get('status')}); see driver.nvml"
    if "torch" in needs and not ctx.torch.get("importable"):
        return "torch does not import; see torch.import"
    if "gpu" in needs:
        if ctx.options.device == "cpu":
            return "--device cpu was given"
        found = len(live_gpus(ctx.facts))
        wanted = max(1, spec.min_gpus)
        if found < wanted:
            return f"needs at least {wanted} GPU{'s' if wanted > 1 else ''}, found {found}"
        if "live" in needs and ctx.device != "cuda":
            return "torch cannot use the GPUs; see torch.cuda-available"
    return None


ProgressHook = Callable[[str, CheckSpec, list[Result]], None]


@dataclass
class Run:
    results: list[Result] = field(default_factory=list)
    interrupted: bool = False
    duration_s: float = 0.0


def run_checks(
    specs: list[CheckSpec],
    facts: dict[str, Any],
    options: Options,
    settings_for: Callable[[CheckSpec], dict[str, Any]],
    hook: ProgressHook | None = None,
) -> Run:
    """Run each check; a check that raises is an `error` row, and Ctrl-C/SIGTERM ends the run cleanly."""
    run = Run()
    started = time.monotonic()
    for position, spec in enumerate(specs):
        if hook:
            hook("start", spec, [])
        try:
            results = run_one(spec, CheckContext(facts, options, settings_for(spec), spec))
        except KeyboardInterrupt:
            run.interrupted = True
            run.results += [_skipped(s, "interrupted before it finished") for s in specs[position:]]
            break
        run.results += results
        if hook:
            hook("done", spec, results)
    run.duration_s = time.monotonic() - started
    return run


def run_one(spec: CheckSpec, ctx: CheckContext) -> list[Result]:
    started = time.monotonic()
    reason = unmet(spec, ctx)
    if reason:
        results = [_skipped(spec, reason)]
    else:
        try:
            returned = spec.run(ctx)
            results = returned if isinstance(returned, list) else [returned]
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            results = [Result(spec.id, Status.ERROR, f"the check itself broke: {type(exc).__name__}: {exc}")]
    elapsed = time.monotonic() - started
    for result in results:
        result.title = result.title or spec.title
        result.duration_s = result.duration_s or round(elapsed, 3)
    return results


def _skipped(spec: CheckSpec, reason: str) -> Result:
    return Result(spec.id, Status.SKIP, reason, title=spec.title)


def broken_plugin_results(broken: list[tuple[str, str]]) -> list[Result]:
    return [
        Result("plugins.load", Status.ERROR, f"{source} failed to load: {error}", aspect=source, title="Plugin loads")
        for source, error in broken
    ]
