"""The rules: each reads the evidence (every result, the node's facts, who used the GPUs around each workload)
and says which cause explains which findings. Order matters: a finding is explained by the first cause that
claims it, so what stops everything (the driver) comes before what hides a GPU, and both before another
process on a GPU. Each rule names what says its cause produces those symptoms (`source`)."""

from __future__ import annotations

from gpudoctor.command import Command, command
from gpudoctor.diagnosis import Evidence, Found, Unjudged, network, occupancy
from gpudoctor.judging import nogpu
from gpudoctor.judging.commands import fix, word
from gpudoctor.judging.compat import cuda_error
from gpudoctor.judging.visible import Visible, present, visible
from gpudoctor.model import Cause, Remediation, Result, Status, cause_from_dict

# What CUDA's start takes down with it: the checks that need torch to reach a GPU.
CUDA_START = ("torch.cuda-available", "torch.arch", "torch.torchvision", "torch.cudnn", "driver.gpu-count")

# --- the driver: what stops everything ------------------------------------------------------------------------

DRIVER_SOURCE = (
    "NVML reference, nvmlInit_v2 return codes (NVML_ERROR_LIB_RM_VERSION_MISMATCH, NVML_ERROR_DRIVER_NOT_LOADED, "
    "NVML_ERROR_LIBRARY_NOT_FOUND); CUDA Runtime API, cudaGetDeviceCount errors: without a loaded driver of the "
    "library's release CUDA cannot start, so nothing that needs a GPU runs"
)


def driver_state(ev: Evidence) -> list[Found]:
    """The driver's library and kernel module of two releases, or no driver at all: CUDA cannot start, and every
    finding that needed it follows. Where the machine's facts say why there is no driver (no GPU on it, a GPU with
    none bound, a container not given its GPUs or their capabilities), that cause, not a missing driver."""
    nvml, system = ev.section("nvml"), ev.section("system")
    module, library = system.get("nvidia_module_version"), nvml.get("driver_version")
    mismatch = nvml.get("status") == "version-mismatch" or (module and library and module != library)
    owner = _first(ev.failing("driver.kernel-module", "driver.nvml"))
    if mismatch and owner is not None:
        said = f"kernel module {module}, library {library}" if module and library else "NVML reports it"
        return [_driver_found("driver-library-mismatch", f"driver/library version mismatch ({said})", owner)]
    owner = _first(ev.failing("driver.nvml"))
    if owner is None or nvml.get("status") not in nogpu.NO_DRIVER:
        return []
    if state := nogpu.classify(nvml, system):
        return [_no_gpu_found(state, owner)]
    return [] if _container_without(ev) else [_driver_found("no-driver", owner.summary, owner)]


def _no_gpu_found(state: nogpu.NoGpu, owner: Result) -> Found:
    """One of the causes of "no GPU" (gpudoctor.judging.nogpu), with driver.nvml's summary and cure, which say it."""
    return Found(
        Cause(
            state.case,
            Status.FAIL,
            owner.summary,
            owner.remediation,
            where=[g["address"] for g in state.gpus],
            evidence=list(state.evidence),
            source=nogpu.SOURCES[state.case],
        ),
        fold=("driver.nvml", "driver.kernel-module", "torch.cuda-driver", *CUDA_START),
    )


def driver_too_old(ev: Evidence) -> list[Found]:
    """A driver older than the one torch's CUDA needs: CUDA does not start for this torch (cudaErrorInsufficient
    Driver, "The NVIDIA driver on your system is too old"), so torch sees no GPU and nothing that needs one runs."""
    owner = next((r for r in ev.of("torch.cuda-driver") if r.status == Status.FAIL), None)
    if owner is None or owner.explained_by not in (None, "driver-too-old-for-torch"):
        return []  # a driver missing or of two releases is the cause (driver_state)
    return [
        Found(
            Cause("driver-too-old-for-torch", Status.FAIL, owner.summary, owner.remediation, source=TOO_OLD_SOURCE),
            fold=("torch.cuda-driver", "torch.cuda-available"),
        )
    ]


TOO_OLD_SOURCE = (
    "CUDA Runtime API, cudaErrorInsufficientDriver (35): the installed driver is older than the CUDA runtime; "
    "c10/cuda/CUDAFunctions.cpp: torch raises 'The NVIDIA driver on your system is too old' and reports no GPU"
)


def _driver_found(cause_id: str, summary: str, owner: Result) -> Found:
    return Found(
        Cause(cause_id, Status.FAIL, summary, owner.remediation, source=DRIVER_SOURCE),
        fold=("driver.nvml", "driver.kernel-module", "torch.cuda-driver", *CUDA_START),
    )


def lost_gpus(ev: Evidence) -> list[Found]:
    """A GPU fallen off the bus (NVML: GPU_IS_LOST): CUDA cannot use it, and every workload that touched it
    fails."""
    lost = [g for g in ev.section("nvml").get("gpus") or [] if g.get("lost")]
    owner = _first(ev.failing("driver.gpu-count"))
    if not lost or owner is None:
        return []
    where = ", ".join(f"GPU {g['index']}" for g in lost)
    return [
        Found(
            Cause(
                "gpu-lost",
                Status.FAIL,
                f"{where} fell off the bus (NVML: GPU is lost)",
                owner.remediation,
                where=[f"GPU {g['index']}" for g in lost],
                source="NVML reference, NVML_ERROR_GPU_IS_LOST; NVIDIA Xid catalogue, Xid 79 (GPU has fallen off the "
                "bus): reset or reboot, and replace the GPU if it recurs",
            ),
            fold=(*CUDA_START, *_workloads(ev)),
        )
    ]


def fabric_down(ev: Evidence) -> list[Found]:
    """An NVSwitch system whose fabric manager is not up: CUDA refuses to start (error 802) until it is."""
    gpus = [g for g in ev.gpus if (g.get("fabric") or {}).get("state") == "not_started"]
    error = cuda_error(ev.section("torch").get("cuda_init_error"))
    owner = _first(ev.failing("driver.fabric"))
    if owner is None or not (gpus or (error and error["code"] == 802)):
        return []
    return [
        Found(
            Cause(
                "fabric-manager-down",
                Status.FAIL,
                "the NVSwitch fabric is not up: nvidia-fabricmanager is not running, so CUDA cannot start",
                owner.remediation,
                where=[f"GPU {g['index']}" for g in gpus],
                source="CUDA Runtime API, cudaErrorSystemNotReady (802): 'the system is not yet ready ... the "
                "fabric manager is not running'; NVIDIA Fabric Manager User Guide",
            ),
            fold=("driver.fabric", *CUDA_START),
        )
    ]


# --- which GPUs a process may see -----------------------------------------------------------------------------

VISIBLE_SOURCE = (
    "CUDA C++ Programming Guide, CUDA Environment Variables: CUDA_VISIBLE_DEVICES is a comma-separated sequence "
    "of device indexes or UUIDs; only the devices it names are visible, and where an index is invalid only the "
    "devices before it are"
)


def visible_devices(ev: Evidence) -> list[Found]:
    """CUDA_VISIBLE_DEVICES hiding every GPU, naming one that does not exist, or hiding some: torch's CUDA start
    finds no device (or fewer), and everything that read its empty arch list or device count follows."""
    value = ev.env.get("CUDA_VISIBLE_DEVICES")
    gpus, torch = ev.gpus, ev.section("torch")
    if value is None or not gpus:
        return []
    seen = visible(value, gpus)
    if seen.mig:
        return []
    if not seen.shown and torch.get("cuda_available") is not True:
        return [_hides_all(value, seen, gpus)]
    if seen.invalid is not None and len(seen.shown) < len(gpus):
        return [_cut_short(value, seen.invalid, seen.shown, gpus)]
    if ev.failing("driver.gpu-count") and len(seen.shown) < len(gpus):
        return [_hides_some(value, seen.shown, gpus)]
    return []


def _hides_all(value: str, seen: Visible, gpus: list[dict]) -> Found:
    there = present(gpus)
    if seen.repeated:
        summary = f"CUDA_VISIBLE_DEVICES={value!r} names {seen.invalid!r} twice, so CUDA shows no GPU ({there} present)"
    elif seen.invalid:
        summary = f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU: {seen.invalid!r} names no GPU here ({there})"
    else:
        summary = f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA ({there} present)"
    return Found(
        Cause(
            "visible-devices-none",
            Status.FAIL,
            summary,
            Remediation(
                "CUDA gives this process only the GPUs CUDA_VISIBLE_DEVICES names; unset it to use every GPU.",
                ["unset CUDA_VISIBLE_DEVICES"],
                fix(
                    "Or name GPUs that exist:",
                    lambda: [command("export CUDA_VISIBLE_DEVICES={gpu}", gpu=indexes(gpus))],
                ),
            ),
            where=["CUDA_VISIBLE_DEVICES"],
            source=VISIBLE_SOURCE,
        ),
        fold=CUDA_START,
    )


def indexes(gpus: list[dict]) -> str:
    """`0,1,2`: the GPUs' indexes as CUDA_VISIBLE_DEVICES names them (Unsafe where one is not a number)."""
    return ",".join(word(g["index"], "number") for g in gpus)


def _cut_short(value: str, invalid: str, shown: tuple[int, ...], gpus: list[dict]) -> Found:
    used = ", ".join(f"GPU {i}" for i in shown)
    return Found(
        Cause(
            "visible-devices-invalid",
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES={value!r}: {invalid!r} names no GPU here ({present(gpus)}), so CUDA stops there "
            f"and uses {used} only",
            fix(
                "CUDA reads CUDA_VISIBLE_DEVICES up to its first invalid entry; name only GPUs that exist.",
                lambda: [command("export CUDA_VISIBLE_DEVICES={gpu}", gpu=indexes(gpus))],
            ),
            where=["CUDA_VISIBLE_DEVICES"],
            source=VISIBLE_SOURCE,
        ),
        fold=CUDA_START,
    )


def _hides_some(value: str, shown: tuple[int, ...], gpus: list[dict]) -> Found:
    return Found(
        Cause(
            "visible-devices-some",
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES={value!r} shows {len(shown)} of the {len(gpus)} GPUs",
            Remediation(
                "Training uses only the GPUs CUDA_VISIBLE_DEVICES names; unset it to use all of them.",
                ["unset CUDA_VISIBLE_DEVICES"],
            ),
            where=["CUDA_VISIBLE_DEVICES"],
            source=VISIBLE_SOURCE,
        ),
        fold=CUDA_START,
    )


def _container_without(ev: Evidence) -> bool:
    """A container whose NVIDIA_VISIBLE_DEVICES gives it no GPU, where the device facts do not say more (a capture
    without them; NVML loaded but lists none)."""
    value = ev.env.get("NVIDIA_VISIBLE_DEVICES")
    none = value is not None and value.strip().lower() in nogpu.CONTAINER_NONE
    told = nogpu.classify(ev.section("nvml"), ev.section("system")) is not None
    return none and not told and not ev.gpus and bool(ev.section("system").get("container"))


def container_without_gpus(ev: Evidence) -> list[Found]:
    """A container started with NVIDIA_VISIBLE_DEVICES=void, none or empty: the NVIDIA runtime mounts no GPU
    (void: not even the driver's libraries), whatever the host has; its missing driver follows from it."""
    value = ev.env.get("NVIDIA_VISIBLE_DEVICES")
    if not _container_without(ev):
        return []
    return [
        Found(
            Cause(
                "container-without-gpus",
                Status.FAIL,
                f"this container was started with NVIDIA_VISIBLE_DEVICES={value!r}: the NVIDIA runtime gave it no GPU",
                Remediation(
                    "NVIDIA_VISIBLE_DEVICES is read when the container starts: start it again with the GPUs (Docker: "
                    "--gpus all; Kubernetes: a nvidia.com/gpu limit in the pod's resources).",
                    ["docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=all IMAGE  # IMAGE: the image it runs"],
                ),
                where=["NVIDIA_VISIBLE_DEVICES"],
                source="NVIDIA Container Toolkit, Environment variables (OCI spec): NVIDIA_VISIBLE_DEVICES none "
                "(no GPU, the driver's libraries mounted), void or empty (no GPU and no libraries)",
            ),
            fold=("driver.nvml", "driver.gpu-count", *CUDA_START),
        )
    ]


# --- another process on a GPU ---------------------------------------------------------------------------------

IN_USE_SOURCE = (
    "NVML on an H100 (recorded 2026-11-26): while another process computes, nvmlDeviceGetUtilizationRates reads "
    "99-100 % and nvmlDeviceGetProcessUtilization gives its PID smUtil 99-100, clocks held by the SW power cap; "
    "NVIDIA DCGM Diagnostics documentation: run the diagnostics on idle GPUs, other processes contend for them"
)
HELD_SOURCE = (
    "torch's caching allocator names every process holding memory on the GPU ('Process N has X memory in use', "
    "c10/cuda/CUDACachingAllocator.cpp); NVML nvmlDeviceGetComputeRunningProcesses: usedGpuMemory per process"
)


def gpus_in_use(ev: Evidence) -> list[Found]:
    """Another process computing on a GPU (its figures measured there are that process's leftovers, and a job
    started now would share it), or only holding its memory (the workloads that ran out of memory there)."""
    watched = [(obs["check"], occupancy.from_watch(obs)) for obs in ev.observations]
    merged = _merged([occupancy.from_facts(ev.facts), *(uses for _, uses in watched)])
    computing = {gpu: use for gpu, use in merged.items() if use.computing}
    holding = {gpu: use for gpu, use in merged.items() if gpu not in computing and use.others}
    offline = _offline(ev.live)
    found = []
    own = _own_listing(ev)
    if computing and not own:
        found.append(_in_use(computing, watched, offline))
    if holding and not own:
        found.append(_held(holding, watched, ev.results, offline))
    return found


# The checks whose cause is memory or a resource another process holds (data/signatures: out of memory, a context
# that cannot be created, cuBLAS's handle, a port in use).
HELD_BY_OTHERS = ("driver.processes",)


def _own_listing(ev: Evidence) -> bool:
    """A paste's process listing with nothing that ran short: nvidia-smi's Processes section lists every process with
    a context on a GPU, the paste's own program among them (nvidia-smi(1), Processes; inside a container none, as the
    driver does not see the container's PID namespace), so memory listed there, or a process computing there, is
    another process's only where the paste shows something ran short of it (a signature a check of HELD_BY_OTHERS
    owns)."""
    if ev.live or "paste" not in ev.facts:
        return False
    from gpudoctor.paste.signatures import table

    known = table()
    sighted = {s.get("id") for s in ev.facts["paste"].get("signatures") or ()}
    return not any(known[i].owner in HELD_BY_OTHERS for i in sighted if i in known)


def _offline(live: bool) -> str:
    """Where a PID lives when the facts are a file's (a capture, a paste, a saved snapshot): a comment for the
    commands that name one, in gpudoctor's own words only ("" when judging this machine, live)."""
    return "" if live else "  # on the node the file is from"


def _merged(readings: list[dict[int, occupancy.Use]]) -> dict[int, occupancy.Use]:
    merged: dict[int, occupancy.Use] = {}
    for uses in readings:
        for gpu, use in uses.items():
            into = merged.setdefault(gpu, occupancy.Use(gpu))
            into.busy_before = into.busy_before or use.busy_before
            into.utilization = max(filter(None, (into.utilization, use.utilization)), default=None)
            for other in use.others.values():
                into.note(other.__dict__)
    return merged


def _in_use(computing: dict[int, occupancy.Use], watched: list[tuple[str, dict]], offline: str) -> Found:
    others = [o for use in computing.values() for o in use.others.values()]
    where = _gpus(computing)
    busy = [u.utilization for u in computing.values() if u.utilization is not None]
    said = f" (GPU {max(busy)} % busy)" if busy else ""
    unjudge = tuple(
        Unjudged(check, frozenset(g for g, u in uses.items() if u.computing), f"measured while {_who(uses)} computed")
        for check, uses in watched
        if any(u.computing for u in uses.values())
    )
    return Found(
        Cause(
            "gpu-in-use",
            Status.WARN,
            f"{where} {'is' if len(computing) == 1 else 'are'} in use by another process{said}: {_listed(others)}",
            _end_them(
                others,
                "Another process computing on a GPU takes its time and memory: what was measured there is not the "
                "hardware, and a job started now would share the GPU. Wait for it to end, or end it.",
                offline,
            ),
            where=[f"GPU {g}" for g in sorted(computing)],
            evidence=[o.describe() for o in others],
            source=IN_USE_SOURCE,
        ),
        fold=("driver.processes",),
        unjudge=unjudge,
    )


def _held(
    holding: dict[int, occupancy.Use], watched: list[tuple[str, dict]], results: list[Result], offline: str
) -> Found:
    others = [o for use in holding.values() for o in use.others.values()]
    ran_out = {r.check_id for r in results if r.basis == "oom" or any(row.basis == "oom" for row in r.rows)}
    unjudge = tuple(
        Unjudged(check, frozenset(g for g in uses if g in holding), f"{_who(uses)} held that GPU's memory", ("oom",))
        for check, uses in watched
        if check in ran_out and any(g in holding for g in uses)
    )
    return Found(
        Cause(
            "gpu-memory-held",
            Status.WARN,
            f"memory on {_gpus(holding)} is held by another process: {_listed(others)}",
            _end_them(
                others,
                "Memory another process holds is memory training cannot use: a job started now runs out of it "
                "sooner. Lowering the batch size does not help; free the memory.",
                offline,
            ),
            where=[f"GPU {g}" for g in sorted(holding)],
            evidence=[o.describe() for o in others],
            source=HELD_SOURCE,
        ),
        fold=("driver.processes",),
        unjudge=unjudge,
    )


def _end_them(others: list[occupancy.Other], why: str, offline: str = "") -> Remediation:
    """Look at the processes, then end them: those this machine can see by PID; a zombie through its parent (it
    frees its memory when reaped); those in another PID namespace (another container, the host) from where they
    run."""
    seen = [o for o in others if o.name or offline]  # a file's PIDs are the other node's: seen there
    pids = sorted({o.pid for o in seen if o.status != "zombie"})
    zombies = [o for o in seen if o.status == "zombie"]
    parents = sorted({o.ppid for o in zombies if o.ppid and o.ppid > 1})
    unseen = sorted({o.pid for o in others if o not in seen})

    def built() -> list[Command]:
        commands = []
        if pids or zombies:
            listed = ",".join(str(p) for p in [*pids, *sorted({o.pid for o in zombies})])
            commands.append(command("ps -o pid,ppid,user,stat,etime,args -p {pid}" + offline, pid=listed))
        if pids or parents:
            commands.append(command("kill {pids}" + offline, pids=[*pids, *parents]))
        if unseen:
            commands.append(
                command(
                    "nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv  "
                    "# on the host: PID {pids} runs outside this container",
                    pids=unseen,
                )
            )
        return commands

    return fix(why, built)


def _who(uses: dict[int, occupancy.Use]) -> str:
    others = {o.pid: o for use in uses.values() for o in use.others.values()}
    named = [f"pid {o.pid} ({o.name})" if o.name else f"pid {o.pid}" for o in others.values()]
    return " and ".join(named[:2]) + (f" and {len(named) - 2} more" if len(named) > 2 else "")


def _listed(others: list[occupancy.Other]) -> str:
    unique = list({o.pid: o for o in others}.values())
    said = "; ".join(o.describe() for o in unique[:2])
    return said + (f"; and {len(unique) - 2} more" if len(unique) > 2 else "")


def _gpus(uses: dict[int, occupancy.Use]) -> str:
    indexes = sorted(uses)
    return f"GPU {indexes[0]}" if len(indexes) == 1 else "GPUs " + ", ".join(map(str, indexes))


def _workloads(ev: Evidence) -> tuple[str, ...]:
    """The checks that ran a workload and failed (an error or a timeout)."""
    return tuple(r.check_id for r in ev.results if r.status in (Status.ERROR, Status.TIMEOUT))


def _first(results: list[Result]) -> Result | None:
    return results[0] if results else None


# --- rank 0 of a cluster run ----------------------------------------------------------------------------------

# The causes of a node's own diagnosis that say another process used its GPUs (report.document.BUSY_CAUSES).
BUSY = ("gpu-in-use", "gpu-memory-held")


def node_causes(ev: Evidence) -> list[Found]:
    """Every node's own causes, named by the node, first in rank 0's report; a node whose GPUs another process
    used has the cross-node figures that name it not judged (never named slow, never drained for them)."""
    found = []
    checks = sorted({r.check_id for r in ev.results})
    for node in ev.nodes:
        name = str(node.get("name"))
        for saved in node.get("causes") or []:
            try:
                cause = cause_from_dict(saved)
            except (TypeError, KeyError, ValueError, AttributeError):
                continue
            busy = cause.id.startswith(BUSY)
            cause.id = f"{name}:{cause.id}"
            cause.summary = f"{name}: {cause.summary}"
            cause.where = [f"{name} {w}" for w in cause.where] or [name]
            cause.explains = [f"{name}: {label}" for label in cause.explains]
            why = f"{name}'s GPUs were used by another process ({cause.id.partition(':')[2]})"
            unjudge = tuple(Unjudged(c, None, why, ("figure",), frozenset({name})) for c in checks) if busy else ()
            found.append(Found(cause, unjudge=unjudge))
    return found


RULES = (
    driver_state,
    driver_too_old,
    lost_gpus,
    fabric_down,
    container_without_gpus,
    visible_devices,
    gpus_in_use,
    *network.RULES,
)
CLUSTER_RULES = (node_causes, *network.CLUSTER_RULES)
