"""Driver and devices: NVML loads, the kernel module agrees with the library, every GPU is there and usable."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    FACT_NAMES,
    Metric,
    Remediation,
    Result,
    Row,
    Status,
    check,
    command,
    cuda_version_text,
    fix,
    from_rows,
    gpu_row,
    not_captured,
    usable,
    word,
    worst,
)
from gpudoctor.judging import nogpu, nvml_init
from gpudoctor.judging.nvml_init import INIT_FINDINGS
from gpudoctor.judging.nvml_init import UNCAPTURED_DEVICES as UNCAPTURED_DEVICES  # where tests read it

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext

COMPUTE_MODE_NAMES = {"exclusive_thread": "Exclusive_Thread", "exclusive_process": "Exclusive_Process"}


def judge_nvml(
    nvml: dict[str, Any], system: dict[str, Any] | None = None, torch: dict[str, Any] | None = None
) -> Result:
    """NVML initialised; when not, why, with the fix. Where the machine's own facts (the PCI bus, /dev/nvidia*,
    the container) say which cause of "no GPU" holds, that cause and its own cure (gpudoctor.judging.nogpu); a
    missing driver's fix installs one that runs the installed torch (else the default torch build), with the
    packages of the node's distribution."""
    status = nvml.get("status")
    if status == "ok":
        cuda = cuda_version_text(nvml.get("cuda_driver_version"))
        driver = nvml.get("driver_version")
        supports = f", supports CUDA {cuda}" if cuda else ""
        said = f"driver {driver}{supports}" if driver else "the driver version is not in this capture"
        return Result(
            Status.PASS,
            f"{said}, {plural(len(nvml['gpus']), 'GPU')}" if "gpus" in nvml else f"{said} (no GPU list here)",
            metrics=[Metric("driver_version", driver), Metric("cuda_driver_version", cuda)],
        )
    summary, remediation = nvml_init.failure(nvml, system or {}, torch or {})
    return Result(Status.FAIL, summary, remediation=remediation)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def judge_kernel_module(nvml: dict[str, Any], system: dict[str, Any]) -> Result:
    modules = system.get("kernel_modules", [])
    if "nouveau" in modules:
        return Result(
            Status.FAIL,
            "the open-source nouveau driver is loaded; it claims the GPUs instead of NVIDIA's",
            remediation=nogpu.NOUVEAU_CURE,
        )
    loaded = system.get("nvidia_module_version")
    library = nvml.get("driver_version")
    if loaded and library and loaded != library:
        summary, remediation = INIT_FINDINGS["version-mismatch"]
        return Result(
            Status.FAIL,
            f"kernel module {loaded}, library {library}: {summary}",
            remediation=remediation,
        )
    if loaded and not library:
        mismatch = nvml.get("status") == "version-mismatch"
        why = "NVML reports a driver/library version mismatch" if mismatch else "the library version is unknown"
        return Result(Status.SKIP, f"kernel module {loaded}; {why} (see driver.nvml)")
    if not loaded and nvml.get("status") != "ok":
        return Result(Status.SKIP, "no NVIDIA kernel module to compare")
    if not loaded:
        return Result(Status.PASS, "nouveau not loaded; the module's version is not readable here")
    return Result(Status.PASS, f"kernel module {loaded} matches the library, nouveau not loaded")


# NVML starts and counts no GPU: nvidia-smi prints "No devices were found" (nvmlDeviceGetCount returns 0). The driver
# left every GPU it probed, or none was given: its kernel log says which. NVIDIA open-gpu-kernel-modules README
# ("supported on Turing and later GPUs"; older GPUs need the proprietary module) and the driver README's "Supported
# NVIDIA GPU Products" (a GPU of a legacy branch: 'NVRM: The NVIDIA ... GPU installed in this system is supported
# through the NVIDIA NNN.xx Legacy drivers'); RmInitAdapter failures and a GPU fallen off the bus are the kernel
# log's own lines (data/signatures/kernel.toml); NVIDIA Container Toolkit, Specialized Configurations with Docker
# (a container started without --gpus, or with NVIDIA_VISIBLE_DEVICES none, has the libraries and no GPU).
NO_GPU_FOUND = Remediation(
    "The driver is loaded but drives no GPU: none on the bus (or in this VM), a GPU this driver does not support "
    "(the open kernel module before Turing, a legacy GPU, a GPU newer than the driver), one it failed to "
    "initialise, or a container given no GPU. The kernel log names it.",
    [
        "lspci -nnk -d 10de:  # an NVIDIA GPU on the bus and the driver in use: no line, no GPU here (or not passed "
        "through to this VM)",
        "sudo dmesg | grep NVRM  # 'not supported by open nvidia.ko' or 'NVIDIA open kernel modules' (a GPU before "
        "Turing: the proprietary driver, nvidia-driver-NNN not -open), 'supported through the NVIDIA NNN.xx Legacy "
        "drivers' (that branch), 'RmInitAdapter failed' or 'fallen off the bus' (paste these lines: gpudoctor check "
        "--from)",
        "docker run --gpus all ...  # in a container: it was given no GPU (NVIDIA_VISIBLE_DEVICES none or void)",
    ],
    source="nvidia-smi (nvmlDeviceGetCount 0: 'No devices were found'); NVIDIA open-gpu-kernel-modules README "
    "(Turing and later); NVIDIA driver README, Supported NVIDIA GPU Products and legacy branches; NVIDIA Container "
    "Toolkit, Specialized Configurations with Docker",
)


def judge_gpu_count(nvml: dict[str, Any], torch: dict[str, Any], env: dict[str, str], expect: int | None) -> Result:
    gpus = nvml.get("gpus", [])
    lost = [g for g in gpus if g.get("lost")]
    hidden = [g for g in gpus if not g.get("lost") and not g.get("accessible", True)]
    unlisted = max(0, (nvml.get("attached_gpus") or 0) - len(gpus))  # a capture taken with `nvidia-smi -i`
    found = len(gpus) - len(lost) - len(hidden) + unlisted
    metrics = [Metric("gpus_nvml", found, expected=expect, expected_source="--expect-gpus" if expect else None)]
    if not gpus and not unlisted and nvml.get("status", "ok") == "ok":
        return Result(Status.FAIL, "NVML starts but finds no GPU (nvidia-smi: No devices were found)",
                      remediation=NO_GPU_FOUND, metrics=metrics)  # fmt: skip
    if lost:
        rows = [gpu_row(g, Status.FAIL, f"lost: {g.get('error')}") for g in lost]
        return Result(
            Status.FAIL,
            f"{len(lost)} GPU{'s are' if len(lost) > 1 else ' is'} lost (index "
            f"{', '.join(str(g['index']) for g in lost)}): fell off the bus or hung",
            remediation=Remediation(
                "A lost GPU needs a reset or a reboot; if it comes back lost, "
                "drain the node and have the GPU replaced.",
                ["sudo dmesg | grep -E 'Xid|fallen off the bus'", "sudo reboot"],
            ),
            metrics=metrics,
            rows=rows,
        )
    if expect is not None and found != expect:
        return Result(
            Status.FAIL,
            f"found {found} GPUs, expected {expect}{_hidden_note(hidden)}",
            remediation=Remediation(
                "A missing GPU is a hardware, BIOS or driver fault; one NVML counts but this process may not "
                "open is outside its cgroup (the job's allocation) or its /dev/nvidia* permissions.",
                ["lspci -d 10de: | grep -icE '3d|vga'", "nvidia-smi -L", "sudo dmesg | grep -i nvrm"],
            ),
            metrics=metrics,
            rows=_hidden_rows(hidden),
        )
    if unlisted:
        return Result(
            Status.WARN,
            f"the capture lists {len(gpus)} of the node's {len(gpus) + unlisted} GPUs: the other {unlisted} "
            "are not judged",
            metrics=metrics,
            remediation=Remediation(
                "A capture taken with `-i` holds only the GPUs it names; capture them all.",
                ["nvidia-smi -q -x > $(hostname)-nvidia-smi.xml"],
            ),
        )
    result = _visible_to_torch(nvml, torch, env, found, metrics)
    result.summary += _hidden_note(hidden)
    result.rows += _hidden_rows(hidden)
    return result


def _hidden_note(hidden: list[dict[str, Any]]) -> str:
    if not hidden:
        return ""
    indexes = ", ".join(str(g["index"]) for g in hidden)
    return f"; {len(hidden)} more not accessible to this process (index {indexes}: cgroup / permissions)"


def _hidden_rows(hidden: list[dict[str, Any]]) -> list[Row]:
    return [gpu_row(g, Status.SKIP, g.get("error") or "not accessible") for g in hidden]


def _visible_to_torch(
    nvml: dict[str, Any], torch: dict[str, Any], env: dict[str, str], found: int, metrics: list[Metric]
) -> Result:
    seen = torch.get("device_count") or 0
    if torch:  # gathered for the torch checks; a probe without them does not compare
        metrics.append(Metric("gpus_torch", seen))
    if not torch.get("cuda_available") or seen == found:
        note = "" if seen == found or not torch else " (torch cannot use them: see torch.cuda-available)"
        order = _device_order_note(nvml, env)
        if order:
            return Result(
                Status.WARN,
                f"{found} GPUs of several models; CUDA_DEVICE_ORDER is not PCI_BUS_ID",
                metrics=metrics,
                remediation=Remediation(
                    f"On a node of {order}, torch numbers GPUs fastest first unless told otherwise, so "
                    "cuda:0 is not nvidia-smi's GPU 0.",
                    ["export CUDA_DEVICE_ORDER=PCI_BUS_ID"],
                ),
            )
        return Result(Status.PASS, f"{plural(found, 'GPU')}{note}", metrics=metrics)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return Result(
            Status.WARN,
            f"torch sees {seen} of {found} GPUs because CUDA_VISIBLE_DEVICES={visible!r}",
            metrics=metrics,
            remediation=Remediation(
                "CUDA_VISIBLE_DEVICES hides GPUs from torch; unset it to train on all of them.",
                ["unset CUDA_VISIBLE_DEVICES"],
            ),
        )
    return Result(
        Status.FAIL,
        f"torch sees {seen} GPUs but NVML sees {found}",
        metrics=metrics,
        remediation=Remediation(
            "A GPU NVML lists but CUDA cannot open is failing, in MIG mode, or held exclusively.",
            ["nvidia-smi -q | grep -iE 'mig mode|compute mode' -A2", "sudo dmesg | grep -i xid"],
        ),
    )


def _device_order_note(nvml: dict[str, Any], env: dict[str, str]) -> str | None:
    names = {g.get("name") for g in nvml.get("gpus", []) if usable(g)}
    if len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        return ", ".join(sorted(n or "?" for n in names))
    return None


MODE_FIXES = {
    "inforom": command("nvidia-smi -q -i {gpu} | grep -A6 -i inforom  # a corrupt infoROM needs the vendor (RMA)"),
    "compute": command("sudo nvidia-smi -i {gpu} -c DEFAULT"),
    "mig": command("sudo nvidia-smi -i {gpu} -mig 0 && sudo nvidia-smi -i {gpu} -r"),
    "persistence": command("sudo systemctl enable --now nvidia-persistenced  # or: sudo nvidia-smi -i {gpu} -pm 1"),
}


def judge_gpu_modes(gpus: list[dict[str, Any]]) -> Result:
    judged = [_modes_row(g) for g in gpus]
    kinds = [kind for _, found in judged for kind in found]
    cure = Remediation(
        "Compute mode Default lets one process per GPU (and NCCL's helpers) open it; MIG splits a "
        "GPU so NCCL cannot use it whole; persistence keeps the driver initialised between jobs.",
        [command for kind, command in MODE_FIXES.items() if kind in kinds],
    )
    unread = [fact for fact in MODE_FINE if any(fact in (g.get("not_captured") or []) for g in gpus)]
    fine = ", ".join(words for fact, words in MODE_FINE.items() if fact not in unread)
    note = f"; not in this capture: {', '.join(MODE_NAMES[fact] for fact in unread)}" if unread else ""
    if not fine and not kinds:
        return Result(Status.SKIP, f"{', '.join(FACT_NAMES[fact] for fact in unread)}: not in this capture")
    return from_rows([row for row, _ in judged], f"{plural(len(gpus), 'GPU')}: {fine}{note}", cure)


MODE_NAMES = {
    "persistence_mode": "persistence",
    "compute_mode": "compute mode",
    "mig_mode": "MIG",
    "inforom_valid": "infoROM",
}
# What each mode reads when all is well; a capture may lack some (listed as not in it, never claimed).
MODE_FINE = {
    "persistence_mode": "persistence on",
    "compute_mode": "compute mode Default",
    "mig_mode": "no MIG",
    "inforom_valid": "infoROM valid",
}


def _modes_row(gpu: dict[str, Any]) -> tuple[Row, set[str]]:
    problems: list[tuple[Status, str, str]] = []
    if gpu.get("inforom_valid") is False:
        problems.append((Status.FAIL, "infoROM is corrupted", "inforom"))
    mode = gpu.get("compute_mode")
    if mode == "prohibited":
        # Warn: admins set Prohibited on purpose to fence a GPU off; if it was meant to train, the workload
        # checks fail on it.
        problems.append((Status.WARN, "compute mode Prohibited: no process may use this GPU", "compute"))
    elif mode in COMPUTE_MODE_NAMES:
        problems.append((Status.WARN, f"compute mode {COMPUTE_MODE_NAMES[mode]}: one process at a time", "compute"))
    mig = gpu.get("mig_mode")
    if mig and mig["current"]:
        instances = gpu.get("mig_devices")
        count = f" ({plural(len(instances), 'instance')})" if instances is not None else ""
        problems.append((Status.WARN, f"MIG is on{count}: torch and NCCL see instances, not the whole GPU", "mig"))
    if mig and mig["pending"] != mig["current"]:
        problems.append((Status.WARN, "a MIG mode change is pending a GPU reset", "mig"))
    if gpu.get("persistence_mode") is False:
        problems.append((Status.WARN, "persistence mode off: slow start, state lost between jobs", "persistence"))
    if not problems:
        return gpu_row(gpu, Status.PASS, "ok"), set()
    row = gpu_row(gpu, worst([s for s, _, _ in problems]), "; ".join(text for _, text, _ in problems))
    return row, {kind for _, _, kind in problems}


def judge_fabric(gpus: list[dict[str, Any]]) -> Result:
    unread = [g for g in gpus if not_captured(g, "fabric")]
    if gpus and len(unread) == len(gpus):
        return Result(Status.SKIP, not_captured(gpus[0], "fabric") or "")
    with_fabric = [g for g in gpus if (g.get("fabric") or {}).get("state") not in (None, "not_supported")]
    if not with_fabric:
        return Result(Status.SKIP, "no NVSwitch fabric on this node")
    rows = [_fabric_row(gpu) for gpu in with_fabric]
    return from_rows(
        rows,
        f"{len(rows)} GPUs registered with the NVSwitch fabric",
        Remediation(
            "On NVSwitch systems the fabric manager must run (same version as the driver) before CUDA can "
            "initialise; a degraded or unhealthy fabric route cuts NVLink bandwidth or hangs collectives, so "
            "read the fabric manager's log and drain the node if it persists.",
            [
                "sudo systemctl enable --now nvidia-fabricmanager",
                "journalctl -u nvidia-fabricmanager -b | tail -50",
                command("nvidia-smi -q -i {gpu} | grep -A12 -i fabric"),
            ],
        ),
    )


def _fabric_row(gpu: dict[str, Any]) -> Row:
    fabric = gpu["fabric"]
    if fabric["state"] == "not_started":
        return gpu_row(gpu, Status.FAIL, "fabric not started: CUDA init fails (error 802)")
    if fabric["state"] == "in_progress":
        return gpu_row(gpu, Status.WARN, "fabric registration still in progress")
    if fabric["status"]:
        said = fabric["status"] if isinstance(fabric["status"], str) else f"NVML error {fabric['status']}"
        return gpu_row(gpu, Status.FAIL, f"fabric registration failed ({said})")
    problems = fabric_health_problems(fabric.get("health") or {})
    if not problems:
        return gpu_row(gpu, Status.PASS, "fabric registered")
    return gpu_row(gpu, worst([s for s, _ in problems]), "fabric " + "; ".join(text for _, text in problems))


FABRIC_SUMMARY = {
    "unhealthy": (Status.FAIL, "health unhealthy"),
    "limited_capacity": (Status.WARN, "at limited capacity"),
}
FABRIC_FLAGS = {
    "bandwidth_degraded": (Status.WARN, "NVLink bandwidth degraded"),
    "route_recovery": (Status.WARN, "route recovery in progress"),
    "route_unhealthy": (Status.FAIL, "route unhealthy"),
    "access_timeout_recovery": (Status.WARN, "access timeout recovery in progress"),
}


def fabric_health_problems(health: dict[str, Any]) -> list[tuple[Status, str]]:
    """What the driver's fabric health report says is wrong; empty where all is well or it reports nothing
    (drivers before the versioned fabric struct, GPUs without a fabric manager)."""
    problems = [FABRIC_SUMMARY[health["summary"]]] if health.get("summary") in FABRIC_SUMMARY else []
    problems += [finding for flag, finding in FABRIC_FLAGS.items() if health.get(flag) is True]
    if health.get("configuration") not in (None, "correct"):
        problems.append((Status.FAIL, f"incorrect configuration: {health['configuration']}"))
    return problems


def judge_processes(gpus: list[dict[str, Any]], process_info: dict[str, dict[str, Any]]) -> Result:
    rows, held = [], []
    for gpu in gpus:
        procs = gpu.get("processes")
        procs = procs if procs is None else [p for p in procs if not p.get("own")]  # gpudoctor's own
        missing = not_captured(gpu, "processes")
        if missing:
            rows.append(gpu_row(gpu, Status.SKIP, missing))
        elif procs is None:
            rows.append(gpu_row(gpu, Status.SKIP, "process list not available"))
        elif not procs:
            rows.append(gpu_row(gpu, Status.PASS, "no other process"))
        else:
            said = [_describe(p, process_info) for p in procs[:2]]
            more = f"; and {len(procs) - 2} more processes" if len(procs) > 2 else ""
            rows.append(gpu_row(gpu, Status.WARN, "; ".join(said) + more))
            held += [p["pid"] for p in procs]
    return from_rows(
        rows,
        "no other process holds GPU memory",
        fix(
            "Memory held by other processes is memory training cannot use; zombies keep it until they are reaped "
            "(end a zombie's parent).",
            lambda: [
                "nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv",
                *([command("ps -o pid,ppid,user,stat,etime,args -p {pid}", pid=",".join(pids(held)))] if held else []),
            ],
        ),
    )


def pids(found: list[Any]) -> list[str]:
    """Process ids as words for a command, each once, in order (Unsafe where one is not a number)."""
    return [word(pid, "number") for pid in dict.fromkeys(found)]


def _describe(proc: dict[str, Any], process_info: dict[str, dict[str, Any]]) -> str:
    info = process_info.get(str(proc["pid"]), {})
    state = info.get("status")
    name = re.split(r"[\\/]", info.get("name") or proc.get("name") or "not visible from here")[-1]
    note = " ZOMBIE" if state == "zombie" else ""
    memory = "an unknown amount of memory" if proc.get("used_mib") is None else f"{proc['used_mib']} MiB"
    kinds = [k for k in proc.get("kinds", []) if k != "compute"]
    where = f", MIG instance {proc['mig_instance'][0]}" if proc.get("mig_instance") else ""
    kind = f" {'/'.join(kinds)}" if kinds else ""
    busy = f", computing at {proc['sm_util']} % SM" if proc.get("sm_util") else ""
    return f"pid {proc['pid']} ({name}{note}{kind}{where}) holds {memory}{busy}"


@check("driver.nvml", "NVML loads and the driver answers", uses=("nvml", "system"), cure="no-driver")
def nvml_loads(ctx: CheckContext) -> Result:
    """NVML initialises; driver version and the CUDA version it supports; when not, which "no GPU" it is (no NVIDIA
    device, a GPU with no driver bound, a container without its GPUs or their capabilities, no driver) and its cure."""
    return judge_nvml(ctx.nvml, ctx.system, ctx.torch)


@check("driver.kernel-module", "Kernel module agrees with the library", needs=("system",), uses=("nvml",))
def kernel_module(ctx: CheckContext) -> Result:
    """The loaded kernel module is the library's release (no upgrade without reboot); nouveau is not loaded."""
    return judge_kernel_module(ctx.nvml, ctx.system)


@check("driver.gpu-count", "Every GPU is present and visible", needs=("nvml",), uses=("system",))
def gpu_count(ctx: CheckContext) -> Result:
    """GPU count against --expect-gpus; lost GPUs; GPUs NVML sees that torch does not, and why."""
    nvml = ctx.nvml
    if nvml.get("attached_gpus") == 0 and "gpus" not in nvml:  # a paste's "No devices were found" lists none
        nvml = {**nvml, "gpus": []}
    elif lacking := ctx.lacks("nvml", "gpus", would_give="add the output of `nvidia-smi -L`"):
        return Result(Status.SKIP, lacking)
    torch = {} if ctx.lacks("torch", "device_count") else ctx.torch  # a paste that does not say what torch sees
    return judge_gpu_count(nvml, torch, ctx.system.get("env", {}), ctx.options.expect_gpus)


@check("driver.gpu-modes", "Persistence, compute mode, MIG, infoROM", needs=("nvml",))
def gpu_modes(ctx: CheckContext) -> Result:
    """Persistence mode, compute mode, MIG mode and infoROM validity per GPU."""
    return judge_gpu_modes(ctx.gpus)


@check("driver.fabric", "NVSwitch fabric is up", needs=("nvml",))
def fabric(ctx: CheckContext) -> Result:
    """On NVSwitch systems, every GPU registered with the fabric (fabric manager running)."""
    return judge_fabric(ctx.gpus)


@check("driver.processes", "No other process holds GPU memory", needs=("nvml",), uses=("system",))
def processes(ctx: CheckContext) -> Result:
    """Other processes holding GPU memory (PID, name, memory), stale or zombie ones included."""
    return judge_processes(ctx.gpus, ctx.system.get("gpu_processes", {}))
