"""`--budget SECONDS`: the whole run, start-up included, ends within the budget. The facts (the quick checks) always
run; then the workloads, the most telling first, each sized to the time left and skipped, saying what it would need,
where even its shortest run does not fit.

What a workload costs here: a fixed part (its processes start and import torch, a CUDA context, a model built) and
a part that grows with its work (iterations, steps, seconds). The fixed part is measured at the start of every run:
the torch gateway times `import torch` (the facts' `torch.import_s`), and a workload's ranks start the same way. The
growing part is learnt from earlier runs on this machine (kept beside the baseline, or in the user's state folder),
else taken from what each check declares (`work=Work(rank, seconds, least)`), this project's own measurements:
`cpu` on the 2-core development machine (gloo, 2 ranks; docs/BENCHMARKS.md), `cuda` from the real H100's standard
run of 2026-11-22 less its start-up (tests/fixtures/real/H100-80GB-HBM3.standard.json). DDP declares that it keeps
half its steps at the least, enough for its loss to fall (judging/ddp.py MIN_STEPS).

Which workload first (each declaration's rank): the order of the faults that stopped Llama 3's training on 16,384
H100s ("The Llama 3 Herd of Models", arXiv 2407.21783, Table 5: of 419 unexpected interruptions, faulty GPUs (NVLink
among them)
30.1 %, HBM3 memory 17.2 %, network switches and cables 8.4 %, GPU SRAM 4.5 %, NICs 1.7 %), for the finding each
workload alone makes: a GPU slow or wrong under compute (compute.gemm), memory that corrupts data before ECC counts
it (memory.test), NVLink or the transport NCCL takes (allreduce.bandwidth, then p2p per pair), the PCIe and HBM
links (bandwidth.*), then the whole stack training together (ddp.train) and the power and cooling of every GPU at
once (load.concurrent), the longest. Counters and link states the facts read catch the rest without a workload."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gpudoctor.errors import InputError
from gpudoctor.facts.schema import problem
from gpudoctor.files import read_json, write_json_atomic
from gpudoctor.registry import CheckSpec, Work
from gpudoctor.text import one_line

RESERVE_S = 0.8  # kept for the end: judging, the report written, every child gone
MARGIN = 1.2  # an estimate is planned with a fifth more: a workload cut short is a result lost
# A workload's ranks start like the gateway (import torch), several at once on the same cores, then build their
# context: on the 2-core machine an all-reduce's fixed part measured 4.5-5.3 s against a 2.5 s gateway import.
START_SHARE = {"cuda": 1.5, "cpu": 2.0}  # on CPU two ranks import torch at once on the same cores
FIXED_EXTRA_S = {"cuda": 1.5, "cpu": 0.8}  # a CUDA context and NCCL's init, or gloo's, after the import
UNKNOWN_WORK_S = 10.0  # a plugin's workload nothing has measured yet
HISTORY_NAME = "gpudoctor-durations.json"
MIN_SCALE = 0.25  # the shortest a workload runs unless it declares more: a quarter of its work (MIN_REPEATS timings)


@dataclass
class Cost:
    fixed_s: float
    work_s: float  # at full size

    def at(self, scale: float) -> float:
        return self.fixed_s + self.work_s * scale


@dataclass
class Decision:
    scale: float = 1.0
    limit_s: float | None = None
    skip: str | None = None


@dataclass
class Budget:
    """The run's deadline and what each workload costs; `plan` decides one workload at a time, in PRIORITY order,
    with the time then left."""

    seconds: float
    deadline: float  # time.time() by which the process ends
    device: str
    import_s: float
    history: dict[str, Any] = field(default_factory=dict)
    history_path: Path | None = None
    reserve_s: float = 0.0  # kept for what runs after (a cluster run's cross-node checks)
    works: dict[str, Work] = field(default_factory=dict)  # what each workload declares (registry.Work)

    @classmethod
    def start(
        cls,
        seconds: float,
        device: str,
        import_s: float | None,
        beside: str | None,
        specs: list[CheckSpec],
        begun: float | None = None,
    ) -> Budget:
        """The budget counted from `begun` (time.time()), else this process's start (start-up included); history
        read from beside the baseline file, else the user's state folder; each workload's cost as its check
        declares it."""
        begun = begun or psutil.Process().create_time()
        path = history_path(beside)
        works = declared(specs)
        return cls(seconds, begun + seconds, device, import_s or 1.5, read_history(path), path, works=works)

    def left(self) -> float:
        return self.deadline - time.time() - RESERVE_S

    def cost(self, check_id: str) -> Cost:
        """From this machine's earlier runs of the workload where they span two sizes (a line through its
        durations); else this run's probe for the fixed part and what is known of the work."""
        runs = self._runs(check_id)
        fitted = fit(runs)
        if fitted:
            return fitted
        fixed = self.import_s * START_SHARE.get(self.device, 1.5) + FIXED_EXTRA_S.get(self.device, 1.0)
        declared_work = self.works.get(check_id)
        work = declared_work.seconds.get(self.device, UNKNOWN_WORK_S) if declared_work else UNKNOWN_WORK_S
        if runs:  # one size seen: the work is what it took beyond the fixed part
            scale, took = runs[-1]
            work = max(work * 0.5, (took - fixed) / scale)
        return Cost(fixed, work)

    def _runs(self, check_id: str) -> list[tuple[float, float]]:
        found = (self.history.get(self.device) or {}).get(check_id)
        if not isinstance(found, list):
            return []
        return [(float(r[0]), float(r[1])) for r in found if _pair(r)]

    def plan(self, check_id: str, whole: bool = False) -> Decision:
        """Run at full size where it fits, else at the share of its work that fits (no less than MIN_SCALE; all of
        it for a cross-node check, `whole`), else not at all: "not within the 15 s budget; needs about 12 s"."""
        left, cost = self.left() - self.reserve_s, self.cost(check_id)
        least = 1.0 if whole else self.least(check_id)
        if left >= cost.at(1.0) * MARGIN:
            return Decision(1.0, limit_s=max(left, 1.0))
        if left >= cost.at(least) * MARGIN:
            return Decision(max(least, (left / MARGIN - cost.fixed_s) / cost.work_s), limit_s=left)
        needs = cost.at(least) * MARGIN
        return Decision(skip=f"not within the {self.seconds:g} s budget: needs about {needs:.0f} s ({left:.0f} s left)")

    def least(self, check_id: str) -> float:
        """The least share of its work a workload runs (its declaration's, else MIN_SCALE)."""
        work = self.works.get(check_id)
        return work.least if work else MIN_SCALE

    def reserved(self, after: tuple[str, ...]) -> float:
        """Time kept for the checks that run after these (a cluster run's cross-node checks, at full size), at most
        half the budget: a node's own checks never take the time the cluster's need."""
        return min(self.seconds * 0.5, sum(self.cost(check_id).at(1.0) * MARGIN for check_id in after))

    def follow(self) -> Decision:
        """A cross-node check on a node other than rank 0: it takes part in what rank 0 runs, until the deadline."""
        left = self.left()
        if left <= 1.0:
            return Decision(skip=f"not within the {self.seconds:g} s budget: its time ran out here")
        return Decision(1.0, limit_s=left)

    def learn(self, check_id: str, scale: float, duration_s: float) -> None:
        """Keep this run's (size, duration) of the workload: the last KEPT_RUNS plan the next runs."""
        if scale <= 0 or duration_s <= 0:
            return
        runs = [*self._runs(check_id), (round(scale, 3), round(duration_s, 3))][-KEPT_RUNS:]
        self.history.setdefault(self.device, {})[check_id] = [list(r) for r in runs]

    def save(self) -> None:
        """Keep what was learnt for the next run; a folder that cannot be written keeps nothing (the budget still
        holds: the defaults and this run's probe plan it)."""
        if self.history_path is None:
            return
        try:
            self.history_path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.history_path, self.history)
        except OSError:
            return


KEPT_RUNS = 6


def _pair(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e5 for v in item)
    )


def fit(runs: list[tuple[float, float]]) -> Cost | None:
    """A workload's fixed part and full work from its runs at two sizes or more (least squares of duration on
    size); None where they span one size or give no sensible line."""
    scales = {scale for scale, _ in runs}
    if len(scales) < 2:
        return None
    n = len(runs)
    mean_x = sum(x for x, _ in runs) / n
    mean_y = sum(y for _, y in runs) / n
    spread = sum((x - mean_x) ** 2 for x, _ in runs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in runs) / spread
    fixed = mean_y - slope * mean_x
    if slope <= 0 or fixed < 0:
        return None
    return Cost(fixed, slope)


def seconds_left(budget: float | None, begun: float | None = None) -> float | None:
    """The time a --budget leaves now, counted from `begun`, else the process's start (None without one)."""
    return None if not budget else (begun or psutil.Process().create_time()) + budget - time.time()


def history_path(beside: str | None) -> Path | None:
    """Beside the baseline file where there is one (a site keeps both per node type), else
    $XDG_STATE_HOME/gpudoctor (~/.local/state/gpudoctor)."""
    if beside:
        return Path(beside).resolve().parent / HISTORY_NAME
    state = os.environ.get("XDG_STATE_HOME") or (Path.home() / ".local" / "state")
    return Path(state) / "gpudoctor" / HISTORY_NAME


HISTORY_BYTES = 1 << 20  # six runs of each workload on each device are a few kB
DEVICE_HISTORY = dict[str, list[list[float]]]  # what `save` writes per device: workload -> [[share, seconds], ...]


class HistoryError(InputError):
    """A budget history that is not what `Budget.save` writes."""


def read_history(path: Path | None) -> dict[str, Any]:
    """Durations learnt by earlier runs. A file that is not what `save` writes (not JSON, nested deep, a list
    where a table belongs) is one warning line on stderr and no history: this run's durations replace it."""
    if path is None or not path.is_file():
        return {}
    try:
        data = read_json(path, "budget history", HistoryError, limit=HISTORY_BYTES)
        found = history_problem(data)
        if found is None:
            return data
        wrong = f"budget history {path}: {found}"
    except HistoryError as exc:
        wrong = str(exc)
    print(f"gpudoctor: warning: {one_line(wrong)}; ignored, and rewritten after this run", file=sys.stderr)
    return {}


def history_problem(data: Any) -> str | None:
    """Where `data` is not a table of devices, each a table of workloads and their (share, seconds) runs."""
    if not isinstance(data, dict):
        return f"the history is {type(data).__name__}, not a table of devices"
    return next((wrong for device, runs in data.items() if (wrong := problem(runs, DEVICE_HISTORY, device))), None)


def declared(specs: list[CheckSpec]) -> dict[str, Work]:
    """What each workload among these checks declares it costs."""
    return {spec.id: spec.work for spec in specs if spec.work is not None}


def ordered(specs: list[CheckSpec]) -> list[CheckSpec]:
    """Workloads by their declared rank, the most telling first (a plugin's that declares none last, in its own
    order)."""
    last = 1 + max((spec.work.rank for spec in specs if spec.work), default=0)
    return sorted(specs, key=lambda spec: spec.work.rank if spec.work else last)
