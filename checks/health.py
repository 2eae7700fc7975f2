"""GPU health counters per GPU: ECC, retired pages, row remapping, throttling, temperature, power, PCIe, NVLink, Xid.

Thresholds follow DCGM and the cloud health checks (Azure aznhc, Meta gcm) and are configurable.
Xids are graded by NVIDIA's Xid catalogue (gpudoctor/judging/xid.py); this module turns its grades into rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudoctor.api import (
    SEVERITY,
    Metric,
    Remediation,
    Result,
    Row,
    Status,
    bad_summary,
    check,
    command,
    fix,
    from_rows,
    gpu_model,
    gpu_row,
    not_captured,
    same_pci,
    worst,
)
from gpudoctor.judging import xid as catalogue

if TYPE_CHECKING:
    from gpudoctor.api import CheckContext, Command

# Clock event reasons (decoded by the NVML gateway): hardware slowdowns fail as DCGM fails them.
THROTTLE_FAIL = {
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
}
THROTTLE_WARN = {"sw_thermal_slowdown": "SW thermal slowdown"}

RESET_FIX = Remediation(
    "Reset the GPU when it is idle (or reboot); if the fault returns, drain the node and have the GPU replaced.",
    [command("sudo nvidia-smi -i {gpu} -r"), "sudo reboot"],
)


def ecc_row(gpu: dict[str, Any], correctable_warn: int) -> Row:
    mode, errors = gpu.get("ecc_mode"), gpu.get("ecc_errors") or {}
    if mode is None:
        return gpu_row(gpu, Status.SKIP, "ECC not supported on this GPU")
    if (errors.get("volatile_uncorrected") or 0) > 0:
        return gpu_row(gpu, Status.FAIL, f"{errors['volatile_uncorrected']} uncorrectable ECC errors since boot")
    if not mode["current"]:
        return gpu_row(gpu, Status.WARN, "ECC is disabled: memory errors go undetected")
    if mode["pending"] != mode["current"]:
        return gpu_row(gpu, Status.WARN, "an ECC mode change is pending a reboot")
    if "volatile_corrected" not in errors:  # nvidia-smi's table shows only the uncorrectable count
        return gpu_row(gpu, Status.PASS, "ECC on, no uncorrectable errors (corrected count: not in this capture)")
    corrected = errors.get("volatile_corrected") or 0
    if corrected > correctable_warn:
        return gpu_row(gpu, Status.WARN, f"{corrected} correctable ECC errors since boot (> {correctable_warn})")
    return gpu_row(gpu, Status.PASS, f"ECC on, {corrected} corrected")


def retired_row(gpu: dict[str, Any], max_pages: int) -> Row:
    pages = gpu.get("retired_pages")
    if pages is None:
        return gpu_row(gpu, Status.SKIP, "no page retirement (row remapping on Ampere and newer)")
    total = pages["sbe"] + pages["dbe"]
    if pages["pending"]:
        return gpu_row(gpu, Status.FAIL, f"page retirement pending ({total} retired): reset the GPU")
    if total >= max_pages:
        return gpu_row(gpu, Status.FAIL, f"{total} retired pages (limit {max_pages}): replace the GPU")
    return gpu_row(gpu, Status.PASS, f"{total} retired pages")


def remap_row(gpu: dict[str, Any]) -> Row:
    rows = gpu.get("remapped_rows")
    if rows is None:
        # NotSupported before Ampere; the real A100 capture in tests (MIG on) prints N/A too, so not "unsupported".
        return gpu_row(gpu, Status.SKIP, "remapped rows not reported for this GPU (GPUs before Ampere have none)")
    if rows["failure"]:
        return gpu_row(gpu, Status.FAIL, "row remapping failed: the GPU needs replacing")
    if rows["pending"]:
        return gpu_row(gpu, Status.FAIL, "a row remap is pending: reset the GPU to apply it")
    return gpu_row(
        gpu, Status.PASS, f"{rows['correctable']} correctable / {rows['uncorrectable']} uncorrectable remaps"
    )


def throttle_row(gpu: dict[str, Any]) -> Row:
    reasons = gpu.get("clock_event_reasons")
    if reasons is None:
        return gpu_row(gpu, Status.SKIP, "clock event reasons not available")
    failing = [text for name, text in THROTTLE_FAIL.items() if name in reasons]
    if failing:
        return gpu_row(gpu, Status.FAIL, f"{', '.join(failing)} active")
    warning = [text for name, text in THROTTLE_WARN.items() if name in reasons]
    if warning:
        return gpu_row(gpu, Status.WARN, f"{', '.join(warning)} active")
    return gpu_row(gpu, Status.PASS, "no hardware or thermal slowdown")


def temperature_row(gpu: dict[str, Any], margin_c: int) -> Row:
    """Against the slowdown threshold where NVML gives one (GeForce, older GPUs), else against the
    T.Limit margin that data-centre GPUs report instead (degrees left before the thermal limit)."""
    temp, slowdown = gpu.get("temperature_c"), gpu.get("temperature_slowdown_c")
    margin = gpu.get("temperature_margin_c")
    if temp is None:
        return gpu_row(gpu, Status.SKIP, "temperature not available")
    if slowdown is not None:
        margin, limit = slowdown - temp, f"the {slowdown} C slowdown threshold"
    else:
        limit = "its thermal limit (T.Limit)"
    if margin is None:
        missing = not_captured(gpu, "temperature_slowdown_c")
        if missing:
            return gpu_row(gpu, Status.SKIP, f"{temp} C; {missing}")
        return gpu_row(gpu, Status.PASS, f"{temp} C (no thermal limit reported)")
    if margin <= 0:
        return gpu_row(gpu, Status.FAIL, f"{temp} C, at or over {limit}")
    if margin < margin_c:
        return gpu_row(gpu, Status.WARN, f"{temp} C, {margin} C below {limit}")
    return gpu_row(gpu, Status.PASS, f"{temp} C, {margin} C below {limit}")


def power_row(gpu: dict[str, Any], min_fraction: float) -> Row:
    limit, default = gpu.get("power_limit_w"), gpu.get("power_default_limit_w")
    if limit is None or not default:
        return gpu_row(gpu, Status.SKIP, "power limits not available")
    if limit < default * min_fraction:
        return gpu_row(gpu, Status.WARN, f"power limit {limit:.0f} W, below the default {default:.0f} W")
    return gpu_row(gpu, Status.PASS, f"power limit {limit:.0f} W (default {default:.0f} W)")


def pcie_row(gpu: dict[str, Any], replay_warn: int) -> Row:
    """A lower generation at idle is power saving; a narrower link or a slot slower than the GPU is not."""
    link = gpu.get("pcie") or {}
    gen, max_gen, gpu_max = link.get("gen"), link.get("max_gen"), link.get("gpu_max_gen")
    width, max_width = link.get("width"), link.get("max_width")
    if gen is None or width is None:
        return gpu_row(gpu, Status.SKIP, "PCIe link state not available")
    missing = not_captured(gpu, "pcie_max")
    if missing:
        return gpu_row(gpu, Status.SKIP, f"Gen{gen} x{width} now; {missing}")
    problems = []
    if max_width and width < max_width:
        problems.append(f"link is x{width} of x{max_width}: reseat the GPU or check the slot/riser")
    if gpu_max and max_gen and max_gen < gpu_max:
        problems.append(f"the slot runs Gen{max_gen}, the GPU supports Gen{gpu_max}")
    replays = link.get("replays") or 0
    if replays > replay_warn:
        problems.append(f"{replays} PCIe replays (> {replay_warn}): signal integrity problem")
    if problems:
        return gpu_row(gpu, Status.WARN, "; ".join(problems))
    idle = (
        f" (Gen{gen} now: links train down at idle; bandwidth.host-device measures it under load)"
        if (max_gen and gen < max_gen)
        else ""
    )
    return gpu_row(gpu, Status.PASS, f"Gen{max_gen or gen} x{width}{idle}")


def nvlink_row(gpu: dict[str, Any], error_warn: int) -> Row:
    links = gpu.get("nvlinks") or []
    if not links:
        return gpu_row(gpu, Status.SKIP, "no NVLink")
    active = [lk for lk in links if lk["active"]]
    if not active:
        return gpu_row(gpu, Status.SKIP, "no NVLink connected")
    expected = (gpu_model(gpu) or {}).get("nvlink_links") or len(links)
    if len(active) < expected:
        inactive = ", ".join(str(lk["link"]) for lk in links if not lk["active"])
        which = f"links {inactive}" if len(links) == expected else f"inactive: links {inactive}"
        return gpu_row(gpu, Status.FAIL, f"{expected - len(active)} of {expected} NVLinks down ({which})")
    noisy = [lk for lk in active if _link_errors(lk) > error_warn]
    if noisy:
        worst_link = max(noisy, key=_link_errors)
        return gpu_row(
            gpu,
            Status.WARN,
            f"{len(noisy)} links with > {error_warn} CRC/replay/recovery errors "
            f"(link {worst_link['link']}: {_link_errors(worst_link)})",
        )
    unused = f" ({len(links) - len(active)} more unused on this board)" if len(links) > len(active) else ""
    return gpu_row(gpu, Status.PASS, f"{len(active)} NVLinks up{unused}")


def _link_errors(link: dict[str, Any]) -> int:
    return sum(link.get(k) or 0 for k in ("replay", "recovery", "crc_flit", "crc_data"))


def judge_xid(kernel_log: dict[str, Any], gpus: list[dict[str, Any]]) -> Result:
    """Every Xid graded by NVIDIA's catalogue (gpudoctor/judging/xid.py), per GPU, floods counted once; Xid 154's own
    recovery verdict; NVSwitch SXids from the same log."""
    if not kernel_log.get("readable"):
        return Result(Status.SKIP, f"Xids not readable: {kernel_log.get('reason')}", remediation=UNREADABLE)
    xids = kernel_log.get("xids", [])
    judged = [xid_row(gpu, xids) for gpu in gpus]
    judged += [xid_row({"pci_bus_id": pci, "name": f"GPU at PCI {pci}"}, xids) for pci in _unlisted(xids, gpus)]
    judged += [sxid_row(event) for event in kernel_log.get("sxids", [])]
    rows = [row for row, _ in judged]
    actions = {action for _, found in judged for action in found}
    source = kernel_log.get("source") or "dmesg"
    noted = [r for r in rows if r.status == Status.PASS and r.summary != "no Xid"]
    ok = f"no Xid that needs action in the kernel log ({source})"
    ok += f"; noted: {bad_summary(noted)}" if noted else ""
    return from_rows(
        rows,
        ok,
        Remediation(
            PROGRAM_WHY if actions == {"SANITIZE"} else CATALOGUE_WHY,
            [XID_COMMANDS.get(source, XID_COMMANDS["dmesg"])] + [ACTION_COMMANDS[a] for a in ACTIONS if a in actions],
        ),
    )


CATALOGUE_WHY = (
    "The Xid catalogue's action for each: drain the node first; a GPU that needs a reset or a reboot again after "
    "one has failing hardware (replace it)."
)
PROGRAM_WHY = (
    "The kernel log names the process whose GPU work faulted (Xid 13, graphics engine exception; Xid 31, GPU memory "
    "page fault: usually an application error, NVIDIA's Xid catalogue): the program's bug or bad input, not shown to "
    "be the GPU's. Rerun it under compute-sanitizer to find the kernel and the access; suspect the GPU only where "
    "it faults for every program."
)


UNREADABLE = Remediation(
    "No Xid is seen without the kernel log. Where kernel.dmesg_restrict=1, reading it takes CAP_SYSLOG (root, "
    "or a container granted SYSLOG), or journalctl -k as a member of adm or systemd-journal.",
    ["sysctl kernel.dmesg_restrict", "sudo gpudoctor check --only health.xid"],
)
XID_COMMANDS = {
    "dmesg": "sudo dmesg -T | grep -iE 'xid|sxid'",
    "journalctl -k": "journalctl -k -b | grep -iE 'xid|sxid'",
}
ACTIONS = ("RESET_GPU", "RESTART_BM", "RESTART_VM", "RESTART_FABRIC", "SANITIZE")
ACTION_COMMANDS = {
    "RESET_GPU": command("sudo nvidia-smi -i {gpu} -r"),
    "RESTART_BM": "sudo reboot",
    "RESTART_VM": "sudo reboot  # the VM; where the GPU stays lost, stop and start it from the cloud console",
    "RESTART_FABRIC": "sudo systemctl restart nvidia-fabricmanager  # after draining; reboot if it recurs",
    "SANITIZE": "compute-sanitizer --tool memcheck python train.py  # the program the Xid names, with its arguments",
}


def _unlisted(xids: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> list[str]:
    """PCI addresses with Xids that no listed GPU has: a GPU that fell off the bus and NVML no longer lists,
    or a pasted kernel log judged without a GPU list."""
    return sorted({e["pci"] for e in xids if not any(same_pci(e["pci"], g.get("pci_bus_id")) for g in gpus)})


def xid_row(gpu: dict[str, Any], events: list[dict[str, Any]]) -> tuple[Row, set[str]]:
    """This GPU's Xids, worst first in the summary, with the actions they ask for."""
    mine: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        if same_pci(event["pci"], gpu.get("pci_bus_id")):
            mine.setdefault(event["xid"], []).append(event)
    if not mine:
        return gpu_row(gpu, Status.PASS, "no Xid"), set()
    merged = {code: catalogue.merge(found) for code, found in sorted(mine.items())}
    graded = [(code, *catalogue.grade(code, event, gpu, mine)) for code, event in merged.items()]
    graded.sort(key=lambda g: -SEVERITY[g[1]])
    status = worst([g[1] for g in graded])
    figures = [Metric("xid_events", event["count"], labels={"xid": code}) for code, event in merged.items()]
    named, hardware = catalogue.culprit(mine), status == Status.FAIL
    said = "; ".join(text + by_process(code, named, hardware) for code, _, text, _ in graded)
    actions = {g[3] for g in graded if g[3]} | ({"SANITIZE"} if named and not hardware else set())
    return gpu_row(gpu, status, said, figures), actions


def by_process(code: int, named: str | None, hardware: bool) -> str:
    """What a program-fault Xid's text adds where the kernel names the process: that program's bug, unless an Xid
    on the same GPU says the hardware failed (then only who was running)."""
    if code not in catalogue.PROGRAM_XIDS or not named:
        return ""
    return f" in {named}" if hardware else f" in {named}: the program's bug"


def sxid_row(event: dict[str, Any]) -> tuple[Row, set[str]]:
    """An NVSwitch error: fatal ones take the fabric down (drain, restart the fabric manager), others warn."""
    switch = {"index": None, "name": f"NVSwitch {event['pci']}", "pci_bus_id": event["pci"]}
    kind = "fatal" if event["fatal"] else "non-fatal"
    text = f"SXid {event['sxid']} ({kind}){catalogue.times_seen(event)}"
    if event["fatal"]:
        return gpu_row(switch, Status.FAIL, text), {"RESTART_FABRIC"}
    return gpu_row(switch, Status.WARN, text), set()


# --- each GPU's figures, carried on its row (one series per figure for monitoring) -------------------------
def counters(name: str, values: dict[str, Any] | None, label: str) -> list[Metric]:
    """Every numeric field of a facts entry as one series of `name`, the field as a label (flags as 0/1)."""
    return [Metric(name, int(v), labels={label: k}) for k, v in (values or {}).items() if isinstance(v, int | float)]


def temperature_figures(gpu: dict[str, Any]) -> list[Metric]:
    fields = {"temperature": "temperature_c", "temperature_slowdown": "temperature_slowdown_c"}
    fields["temperature_margin"] = "temperature_margin_c"
    return [Metric(name, gpu[key], "C") for name, key in fields.items() if gpu.get(key) is not None]


def power_figures(gpu: dict[str, Any]) -> list[Metric]:
    fields = {"power_limit": "power_limit_w", "power_default_limit": "power_default_limit_w"}
    return [Metric(name, gpu[key], "W") for name, key in fields.items() if gpu.get(key) is not None]


PCIE_FIGURES = {
    "gen": "pcie_generation",
    "max_gen": "pcie_max_generation",
    "width": "pcie_width",
    "max_width": "pcie_max_width",
    "replays": "pcie_replays",
}


def pcie_figures(gpu: dict[str, Any]) -> list[Metric]:
    pcie = gpu.get("pcie") or {}
    return [Metric(name, pcie[key]) for key, name in PCIE_FIGURES.items() if pcie.get(key) is not None]


def nvlink_figures(gpu: dict[str, Any]) -> list[Metric]:
    figures = []
    for link in gpu.get("nvlinks") or []:
        figures.append(Metric("nvlink_up", int(bool(link.get("active"))), labels={"link": link["link"]}))
        figures += [
            Metric("nvlink_errors", link[c], labels={"link": link["link"], "counter": c})
            for c in ("replay", "recovery", "crc_flit", "crc_data")
            if link.get(c) is not None
        ]
    return figures


def throttle_figures(gpu: dict[str, Any]) -> list[Metric]:
    return [Metric("clock_event_active", 1, labels={"reason": r}) for r in gpu.get("clock_event_reasons") or []]


def figured(
    gpus: list[dict[str, Any]],
    row: Callable[[dict[str, Any]], Row],
    figures: Callable[[dict[str, Any]], list[Metric]],
    fact: str,
) -> list[Row]:
    """Each GPU's row with its figures attached; a skip where an nvidia-smi capture does not hold the `fact`
    the row judges (never a zero judged as a pass)."""
    rows = []
    for gpu in gpus:
        missing = not_captured(gpu, fact)
        judged = gpu_row(gpu, Status.SKIP, missing) if missing else row(gpu)
        judged.metrics = figures(gpu)
        rows.append(judged)
    return rows


@check("health.ecc", "ECC errors", needs=("nvml",), settings={"correctable_warn": 100})
def ecc(ctx: CheckContext) -> Result:
    """ECC mode; uncorrectable errors fail, correctable ones above a threshold warn."""
    return from_rows(
        figured(
            ctx.gpus,
            lambda g: ecc_row(g, ctx.settings["correctable_warn"]),
            lambda g: counters("ecc_errors", g.get("ecc_errors"), "counter"),
            "ecc_mode",
        ),
        "ECC on, no uncorrectable errors",
        RESET_FIX,
    )


@check("health.retired-pages", "Retired pages", needs=("nvml",), settings={"max_pages": 60})
def retired_pages(ctx: CheckContext) -> Result:
    """Retired pages pending or over the limit (pre-Ampere GPUs; DCGM's limit is 60)."""
    result = from_rows(
        figured(
            ctx.gpus,
            lambda g: retired_row(g, ctx.settings["max_pages"]),
            lambda g: counters("retired_pages", g.get("retired_pages"), "kind"),
            "retired_pages",
        ),
        "no retired pages pending or over the limit",
        RESET_FIX,
    )
    result.metrics.append(Metric("max_pages", ctx.settings["max_pages"], expected_source="DCGM retired-pages limit"))
    return result


@check("health.row-remap", "Row remapping", needs=("nvml",))
def row_remap(ctx: CheckContext) -> Result:
    """Row remapping pending (needs a reset) or failed (needs replacing): Ampere and newer."""
    return from_rows(
        figured(
            ctx.gpus, remap_row, lambda g: counters("remapped_rows", g.get("remapped_rows"), "kind"), "remapped_rows"
        ),
        "no row remap pending or failed",
        RESET_FIX,
    )


@check("health.throttle", "Clock throttling", needs=("nvml",))
def throttle(ctx: CheckContext) -> Result:
    """Clock event reasons: HW slowdown, HW thermal and power brake fail (as DCGM), SW thermal warns."""
    return from_rows(
        figured(ctx.gpus, throttle_row, throttle_figures, "clock_event_reasons"),
        "no hardware or thermal slowdown",
        Remediation(
            "Hardware slowdown means overheating, a failing PSU or an external power brake "
            "signal: check cooling and power.",
            ["nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER"],
        ),
    )


@check("health.temperature", "Temperature", needs=("nvml",), settings={"margin_c": 5})
def temperature(ctx: CheckContext) -> Result:
    """GPU temperature against its slowdown threshold."""
    return from_rows(
        figured(ctx.gpus, lambda g: temperature_row(g, ctx.settings["margin_c"]), temperature_figures, "temperature_c"),
        "every GPU well below its slowdown temperature",
        Remediation("Check airflow, fans and inlet temperature.", ["nvidia-smi -q -d TEMPERATURE"]),
    )


@check("health.power", "Power limit", needs=("nvml",), settings={"min_fraction": 0.95})
def power(ctx: CheckContext) -> Result:
    """Enforced power limit against the default (a capped GPU trains slower)."""
    low = [g for g in ctx.gpus if power_row(g, ctx.settings["min_fraction"]).status == Status.WARN]
    return from_rows(
        figured(ctx.gpus, lambda g: power_row(g, ctx.settings["min_fraction"]), power_figures, "power_limit_w"),
        "every GPU at its default power limit",
        fix("Restore the default power limit.", lambda: restore_power(low)),
    )


def restore_power(gpus: list[dict[str, Any]]) -> list[Command]:
    """`sudo nvidia-smi -i 0,3 -pl 700`: each default limit once, with the GPUs that have it."""
    by_default: dict[str, list[str]] = {}
    for gpu in gpus:
        default = f"{gpu['power_default_limit_w']:.0f}"
        by_default.setdefault(default, []).append(str(gpu_row(gpu, Status.WARN, "").target))
    return [
        command("sudo nvidia-smi -i {gpu} -pl {count}", gpu=",".join(targets), count=watts)
        for watts, targets in by_default.items()
    ]


@check("health.pcie", "PCIe link", needs=("nvml",), settings={"replay_warn": 100})
def pcie(ctx: CheckContext) -> Result:
    """PCIe width and generation against the maximum (idle downshift is normal), replay counter."""
    return from_rows(
        figured(ctx.gpus, lambda g: pcie_row(g, ctx.settings["replay_warn"]), pcie_figures, "pcie"),
        "every GPU's PCIe link at full width",
        Remediation(
            "A narrow link or many replays halve host transfers: reseat the GPU, check risers and BIOS PCIe settings.",
            ["sudo lspci -vvv -d 10de: | grep -E 'LnkCap|LnkSta'"],
        ),
    )


@check("health.nvlink", "NVLink", needs=("nvml",), settings={"error_warn": 100})
def nvlink(ctx: CheckContext) -> Result:
    """Every NVLink up; CRC, replay and recovery error counters."""
    return from_rows(
        figured(ctx.gpus, lambda g: nvlink_row(g, ctx.settings["error_warn"]), nvlink_figures, "nvlinks"),
        "every NVLink up with few errors",
        Remediation(
            "A down or noisy NVLink slows or breaks collectives: reset the GPUs, then replace the "
            "board or NVSwitch tray if it persists.",
            ["nvidia-smi nvlink -s", "nvidia-smi nvlink -e"],
        ),
    )


@check("health.xid", "Xid errors in the kernel log", needs=("kernel_log",), uses=("nvml",))
def xid(ctx: CheckContext) -> Result:
    """Xid errors from the kernel log per GPU; critical ones (ECC, fallen off the bus, NVLink) fail."""
    return judge_xid(ctx.kernel_log, ctx.gpus)
