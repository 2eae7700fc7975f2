"""What a check sees: the node's facts through typed accessors, the run's options, its own settings, and the
two ways to run a workload. Checks get it from `gpudoctor.api`; the engine builds one per check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpudoctor.command import command
from gpudoctor.facts.identity import used_gpus, with_gpus
from gpudoctor.facts.nvml import Backend, LiveNvml, Sampler, usable
from gpudoctor.facts.occupancy import WATCH_S, Watch
from gpudoctor.facts.schema import SOURCES, GpuFacts, KernelLog, NvmlFacts, SystemFacts, TorchFacts
from gpudoctor.judging import compat, oom
from gpudoctor.judging.expect import Expectation
from gpudoctor.model import Remediation, Result, Status, gpu_label, gpu_row
from gpudoctor.registry import CheckSpec
from gpudoctor.workloads.isolate import run_isolated
from gpudoctor.workloads.launch import launch

if TYPE_CHECKING:  # a cluster run's session: the cluster package is imported only where one runs
    from gpudoctor.cluster.context import ClusterContext
    from gpudoctor.cluster.session import WorkloadOutcome

DEFAULT_CPU_RANKS = 2
FULL_WORK_FACTOR = 4  # `--level full` repeats every workload's measured work this many times over
MIN_REPEATS = 3  # the fewest timed repetitions a shortened workload keeps: a median and a spread need three


@dataclass
class Options:
    """How this run was asked for, after the command line and the config file were merged."""

    level: str = "quick"
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    timeout: float | None = None  # --timeout: overrides every check's own and the config's
    config_timeout: float | None = None  # the config file's run-wide `timeout`
    expect_gpus: int | None = None
    device: str = "auto"
    offline: bool = False
    baseline: dict[str, Any] | None = None
    pasted_only: bool = False  # `only` came from a paste's signatures (--live): the level still bounds it
    budget: float | None = None  # --budget: the whole run, start-up included, ends within this many seconds
    # When the budget's time began (time.time()): the process's start, or in a cluster run the moment this node
    # joined (a node's launch and rendezvous are the launcher's time, which the budget cannot plan).
    budget_from: float | None = None
    budget_after: tuple[Any, ...] = ()  # the checks (CheckSpec) that run after these under the budget (cross-node)


@dataclass
class Observer:
    """What a run sees of its GPUs around each workload (who else used them, facts.occupancy.Watch), kept for the
    diagnosis: one observation per workload, named by its check."""

    backend: Callable[[], Backend] = LiveNvml
    every_s: float = WATCH_S
    observations: list[dict[str, Any]] = field(default_factory=list)

    @contextmanager
    def watching(self, check_id: str, indexes: list[int]) -> Iterator[None]:
        with Watch(indexes, self.every_s, self.backend) as watch:
            yield
        self.observations.append(watch.observation(check_id))


@dataclass
class CheckContext:
    """The node's facts, the run's options and this check's settings; workloads run under its timeout."""

    facts: dict[str, Any]
    options: Options
    settings: dict[str, Any]
    spec: CheckSpec
    cluster: ClusterContext | None = None  # cluster mode: this node's session, and every node on rank 0
    observer: Observer | None = None  # the run's: each workload's GPUs are watched for other processes
    scale: float = 1.0  # the share of its measured work a --budget leaves this workload (engine/budget.py)
    limit_s: float | None = None  # the time a --budget leaves it, where that is shorter than its own timeout

    @property
    def gathered(self) -> set[str]:
        """The fact sources these facts hold (a snapshot from before they were recorded holds them all)."""
        sources = self.facts.get("sources")
        return set(SOURCES if sources is None else sources)

    @property
    def capture(self) -> dict[str, Any] | None:
        """What an `nvidia-smi -q -x` capture being judged is (format, file, DTD version), else None."""
        return self.facts.get("capture")

    def not_gathered(self, source: str) -> str:
        """Why a source's facts are missing here, in words for a skip."""
        if self.capture and self.capture.get("format") == "pasted text":
            from gpudoctor.paste import would_give

            said = would_give(source, self.capture.get("kinds", []))
            return f"not in this paste: it holds no {source.replace('_', ' ')} facts ({said})"
        if self.capture:
            return f"not in this nvidia-smi capture: it holds no {source.replace('_', ' ')} facts"
        return f"not in this snapshot: its {source.replace('_', ' ')} facts were not gathered"

    def lacks(self, section: str, *paths: str, would_give: str | None = None) -> str | None:
        """Judging a paste: why this check cannot judge where facts it reads (dotted below `section`:
        "cudnn.version") are not in it, naming what would give them (the section's usual command, or
        `would_give`); None where all are (always, live)."""
        if (self.capture or {}).get("format") != "pasted text":
            return None
        from gpudoctor.paste import would_give as paste_would_give

        missing = [p for p in paths if not _holds(self.facts.get(section) or {}, p.split("."))]
        if not missing:
            return None
        said = would_give or paste_would_give(section, self.capture.get("kinds", []))
        return f"not in this paste: {section}.{missing[0]} ({said})"

    @property
    def nvml(self) -> NvmlFacts:
        return self.facts.get("nvml") or {}

    @property
    def torch(self) -> TorchFacts:
        return self.facts.get("torch") or {}

    @property
    def system(self) -> SystemFacts:
        return self.facts.get("system") or {}

    @property
    def kernel_log(self) -> KernelLog:
        return self.system.get("kernel_log") or {}

    @property
    def env(self) -> dict[str, str]:
        return self.system.get("env") or {}

    @property
    def machine(self) -> str:
        return self.system.get("machine") or "x86_64"

    @property
    def platform(self) -> str:
        """The wheel platform of the host judged: linux_x86_64, linux_aarch64 or windows."""
        return compat.platform_key(self.system.get("os"), self.machine)

    @property
    def gpus(self) -> list[GpuFacts]:
        """The GPUs this process can use: NVML sees them, they are not lost, no cgroup hides them."""
        return [g for g in self.nvml.get("gpus", []) if usable(g)]

    @property
    def used_gpus(self) -> list[GpuFacts]:
        """The GPUs workloads run on and are judged against, in torch's order: the physical GPU (with its MIG
        slice, where it is one) behind each device torch can use; NVML's usable GPUs where torch's facts were
        not gathered."""
        if not self.torch.get("importable"):
            return self.gpus
        return used_gpus(self.devices, self.gpus)

    def hidden_gpus(self) -> str:
        """Why torch uses fewer GPUs than NVML sees, in words; empty when it uses them all."""
        used, seen = len(self.used_gpus), len(self.gpus)
        if used >= seen:
            return ""
        if any(g.get("mig_slice") for g in self.used_gpus):
            why = "MIG: CUDA gives a process one slice"
        elif "CUDA_VISIBLE_DEVICES" in self.env:
            why = f"CUDA_VISIBLE_DEVICES={self.env['CUDA_VISIBLE_DEVICES']}"
        else:
            why = "the others are not visible to CUDA"
        return f"; NVML sees {seen} ({why})"

    @property
    def devices(self) -> list[dict[str, Any]]:
        """The devices torch numbers (cuda:0...), each with the PCI bus id that names its physical GPU."""
        return self.torch.get("devices") or []

    @property
    def full(self) -> bool:
        return self.options.level == "full"

    @property
    def work_factor(self) -> float:
        """How many times over a workload repeats its measured work: more at `--level full`, less where a --budget
        leaves it only part of its time (`scale`)."""
        return (FULL_WORK_FACTOR if self.full else 1) * self.scale

    def scaled(self, count: int, least: int = MIN_REPEATS) -> int:
        """`count` repetitions times the work factor, never fewer than `least` (a median needs a few)."""
        return max(least, round(count * self.work_factor))

    def work(self, *sizes: str) -> dict[str, Any]:
        """A workload's parameters: the named size settings, `warmup`, and `iters` times the work factor."""
        return {
            **{size: self.settings[size] for size in sizes},
            "warmup": max(1, round(self.settings["warmup"] * min(1.0, self.scale))),
            "iters": self.scaled(self.settings["iters"]),
        }

    @property
    def timeout_s(self) -> float:
        """--timeout, else this check's `timeout` setting, else the config's run-wide one, else its own; never past
        what a --budget leaves it."""
        own = float(
            self.options.timeout or self.settings.get("timeout") or self.options.config_timeout or self.spec.timeout_s
        )
        return min(own, self.limit_s) if self.limit_s is not None else own

    @property
    def device(self) -> str:
        """cuda where torch sees GPUs (or --device cuda), else cpu: gloo runs the same path for real."""
        if self.options.device != "auto":
            return self.options.device
        return "cuda" if self.torch.get("cuda_available") and self.torch.get("device_count") else "cpu"

    @property
    def world_size(self) -> int:
        if self.device == "cuda":
            return len(self.used_gpus)
        return int(self.settings.get("cpu_ranks", DEFAULT_CPU_RANKS))

    def baseline(self, figure: str) -> Expectation | None:
        """This check's `figure` from the saved baseline, passing at its `baseline_tolerance`, or None."""
        saved = self.options.baseline or {}
        value = saved.get("figures", {}).get(f"{self.spec.id}:{figure}")
        tolerance = self.settings.get("baseline_tolerance", 0.9)
        return Expectation(float(value), f"baseline {saved['path']}", floor=tolerance) if value else None

    def with_gpus(self, measured: list[dict[str, Any]]) -> list[tuple[dict[str, Any], GpuFacts]]:
        """Per-device measurements (keyed by torch's `cuda_index`) paired with the physical GPU's facts."""
        return with_gpus(measured, self.devices, self.gpus)

    def launch(
        self, worker: str, params: dict[str, Any], world_size: int | None = None, timeout_s: float | None = None
    ) -> list[Any] | Result:
        """`worker(rank_ctx)` on one rank per GPU (or `cpu_ranks` gloo ranks on CPU) under this check's
        timeout: every rank's return value, or the result saying which rank hung or died, doing what."""
        backend = "nccl" if self.device == "cuda" else "gloo"
        with self.watched():
            outcome = launch(worker, world_size or self.world_size, backend, params, timeout_s or self.timeout_s)
        if outcome.status == Status.PASS:
            return outcome.data
        return out_of_memory(outcome.status, outcome.message, self.used_gpus) or Result(
            outcome.status,
            outcome.message,
            remediation=Remediation(
                "A rank that hangs or dies in a collective is what a training job would hit too.",
                [
                    command("NCCL_DEBUG=WARN gpudoctor check --only {check}", check=self.spec.id),
                    "sudo dmesg | grep -i xid",
                ],
            ),
        )

    def run_across(
        self,
        worker: str,
        params: dict[str, Any],
        local_ranks: int | None = None,
        plan_params: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> WorkloadOutcome | Result:
        """Cluster mode: `worker(rank_ctx)` on every node at once, this node's share being one rank per GPU
        (or `cpu_ranks`, or `local_ranks`). Rank 0 gets every rank's data with the nodes they ran on, or the
        result naming the node that failed; another node gets the result of its own share. Each call on rank
        0 is one attempt (a re-test is a second call, over the nodes of the first); `plan_params` are rank
        0's additions to every node's parameters (the pairs to re-test, say), and every worker also gets
        `spans`: each node's cluster rank -> [its first rank in the workload, its rank count]. `timeout_s`
        limits this attempt (the check's own limit by default)."""
        assert self.cluster is not None, "run_across needs cluster mode (declare needs=('cluster',))"
        backend = "nccl" if self.device == "cuda" else "gloo"
        local = local_ranks or self.world_size
        limit = timeout_s or self.timeout_s
        with self.watched():
            return self.cluster.run(self.spec.id, worker, params, local, backend, limit, plan_params)

    def watch_gpus(self, every_s: float) -> Sampler:
        """NVML read every `every_s` seconds on the GPUs in use while the `with` block runs (a load): SM clock,
        power, temperature and why the clocks are held down, each sample with its wall-clock time."""
        indexes = sorted({g["index"] for g in self.used_gpus if g.get("index") is not None})
        return Sampler(indexes, every_s)

    def run_isolated(self, target: str, payload: dict[str, Any], timeout_s: float | None = None) -> Any | Result:
        """`target(payload)` in its own process session, killed with all it started at this check's timeout:
        what it returned, or the result saying how it hung, crashed or failed and where."""
        with self.watched():
            outcome = run_isolated(target, payload, timeout_s or self.timeout_s)
        if outcome.status == Status.PASS:
            return outcome.data
        raw = "\n".join(text for text in (outcome.message, outcome.stderr_tail.strip()) if text)
        where = "; ".join(f"{name}: {phase}" for name, phase in outcome.progress.items()) or "before any progress"
        failed = out_of_memory(outcome.status, raw, self.used_gpus)
        if failed:
            return failed
        said = outcome.message.partition(":")[0] if outcome.status == Status.ERROR else outcome.message
        return Result(outcome.status, f"workload {said} ({where})", detail=raw or None)

    def watched(self) -> Any:
        """Around a workload on the GPUs: NVML watches them for other processes (the run's observer keeps what
        it saw); nothing on the CPU or where NVML does not work."""
        indexes = sorted({g["index"] for g in self.used_gpus if g.get("index") is not None})
        if self.observer is None or self.device != "cuda" or self.nvml.get("status") != "ok" or not indexes:
            return nullcontext()
        return self.observer.watching(self.spec.id, indexes)

    @staticmethod
    def failed(outcome: Any) -> Result | None:
        """The result a workload came back as instead of its data (it hung, crashed or raised: what
        `run_isolated`, `launch` and `run_across` return then), else None.

            data = ctx.run_isolated(target, payload)
            if failed := ctx.failed(data):
                return failed
        """
        return outcome if isinstance(outcome, Result) else None


def out_of_memory(status: Status, raw: str, gpus: list[GpuFacts]) -> Result | None:
    """A workload that ran out of GPU memory, said in figures (torch's own message read, judging.oom): which GPU,
    what it asked for, what was free; the message itself in `detail`. None where the failure was another."""
    found = oom.parse(raw)
    if found is None:
        return None
    gpu = gpus[found.gpu] if found.gpu is not None and found.gpu < len(gpus) else None
    where = f" ({gpu_label(gpu)})" if gpu and gpu.get("index") != found.gpu else ""
    result = Result(status, f"ran out of GPU memory{found.said()}{where}", basis="oom", detail=raw)
    if gpu is not None:
        result.rows = [gpu_row(gpu, status, f"out of memory{found.said()}")]
        result.rows[0].basis = "oom"
    return result


def _holds(facts: Any, keys: list[str]) -> bool:
    for key in keys:
        if not isinstance(facts, dict) or key not in facts:
            return False
        facts = facts[key]
    return True
