"""An `nvidia-smi -q -x` capture read as a snapshot: the file people already attach to a support ticket,
judged by the same checks as a live node.

nvidia-smi prints what NVML answered, so a capture maps onto the NVML facts. "N/A" (and the other words
nvidia-smi prints for an answer it did not get) is "not available", as NotSupported is live. A field the
capture does not hold at all (an older DTD, a partial capture, NVLink, which `-q` never prints) is listed in
the GPU's `not_captured`, so judges say "not in this capture" instead of judging a zero. Read against real
captures of DTD v10 (driver 418) to v13 (driver 595); the element names that changed between versions
(clocks_throttle_reasons / clocks_event_reasons, the ECC counter forms, power readings) are read in both.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.facts.nvml import CLOCK_EVENT_REASONS, COMPUTE_MODES
from gpudoctor.facts.schema import SCHEMA, SCHEMA_VERSION

ROOT = "nvidia_smi_log"
DTD_PATTERN = re.compile(r"nvsmi_device_v(\d+)\.dtd")
NUMBER = re.compile(r"^-?\d+(\.\d+)?")
# Words nvidia-smi prints where NVML gave no value.
NO_VALUE = {"n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]", "none"}
NO_VALUE_PREFIXES = ("requested functionality has been deprecated", "not available", "insufficient permissions")

# Clock event reason elements (clocks_event_reason_* from driver 535, clocks_throttle_reason_* before) carry
# the gateway's names for the same bits (nvml.CLOCK_EVENT_REASONS), but for this one.
CLOCK_REASON_NAMES = {"display_clocks_setting": "display_clock_setting"}
PROCESS_KINDS = {"C": "compute", "G": "graphics", "M": "mps"}


class CaptureError(ValueError):
    """A file that is XML but not an nvidia-smi log, or that cannot be read."""


def text_head(data: bytes) -> str:
    """The start of a file as text: UTF-8, or UTF-16 with its byte-order mark (what Windows PowerShell's `>`
    writes when a capture is redirected to a file)."""
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    return data[:4096].decode(encoding, errors="ignore")


def to_snapshot(path: Path, data: bytes) -> dict[str, Any]:
    """The capture's facts in snapshot form: NVML facts only, the capture described under "capture"."""
    root = parse(path, data)
    gpus = [Gpu(element, index).facts() for index, element in enumerate(root.findall("gpu"))]
    dtd = DTD_PATTERN.search(text_head(data))
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "tool_version": __version__,
        "taken_at": captured_at(root.findtext("timestamp")),
        "sources": ["nvml"],
        "capture": {
            "format": "nvidia-smi -q -x",
            "file": path.name,
            "dtd_version": int(dtd.group(1)) if dtd else None,
        },
        "nvml": {
            "status": "ok",
            "error": None,
            "error_code": None,
            "driver_version": value(root.findtext("driver_version")),
            "cuda_driver_version": cuda_driver_version(root.findtext("cuda_version")),
            "nvml_version": None,
            "attached_gpus": integer(root.findtext("attached_gpus")),
            "gpus": gpus,
            "topology": {},
        },
        "nvml_calls": {},
        "torch": {},
        "system": {},
        "gather_s": 0.0,
    }


def parse(path: Path, data: bytes) -> ET.Element:
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise CaptureError(f"{path} is XML that does not parse ({exc})") from None
    if root.tag != ROOT:
        raise CaptureError(f"{path} is XML but not an nvidia-smi -q -x capture (root <{root.tag}>, not <{ROOT}>)")
    if root.find("gpu") is None:
        raise CaptureError(f"{path} is an nvidia-smi capture with no <gpu> element: nothing to judge")
    return root


def value(text: str | None) -> str | None:
    """An element's text, or None where nvidia-smi printed that it has no value."""
    if text is None:
        return None
    text = " ".join(text.split())
    lowered = text.lower()
    if not text or lowered in NO_VALUE or lowered.startswith(NO_VALUE_PREFIXES):
        return None
    return text


def number(text: str | None) -> float | None:
    """The number an element starts with ("81920 MiB", "67.03 W", "16x", "27 C"), or None (also for one no
    counter or reading can be: past 2**63, which a 400-digit number in a damaged file is)."""
    found = NUMBER.match(value(text) or "")
    result = float(found.group(0)) if found else math.nan
    return result if math.isfinite(result) and abs(result) < 2.0**63 else None


def integer(text: str | None) -> int | None:
    found = number(text)
    return None if found is None else int(found)


def flag(text: str | None) -> bool | None:
    """Enabled/Disabled, Yes/No, Active/Not Active, True/False."""
    word = (value(text) or "").lower()
    if word in ("enabled", "yes", "active", "true"):
        return True
    if word in ("disabled", "no", "not active", "false"):
        return False
    return None


def cuda_driver_version(text: str | None) -> int | None:
    """nvidia-smi's "12.2" as NVML's 12020."""
    found = re.match(r"^(\d+)\.(\d+)$", value(text) or "")
    return int(found.group(1)) * 1000 + int(found.group(2)) * 10 if found else None


def captured_at(text: str | None) -> str | None:
    """nvidia-smi's timestamp ("Fri Aug  4 11:44:30 2023", the node's local time) in ISO form; None where a
    capture has none."""
    try:
        return datetime.strptime(" ".join((text or "").split()), "%a %b %d %H:%M:%S %Y").isoformat()
    except ValueError:
        return None


class Gpu:
    """One <gpu> element as the NVML gateway's GPU facts; what the element lacks goes in `not_captured`."""

    def __init__(self, element: ET.Element, index: int) -> None:
        self.element = element
        self.index = index
        self.missing: list[str] = []

    def find(self, path: str, fact: str) -> ET.Element | None:
        """The element at `path`; where the capture lacks it, `fact` is noted as not captured."""
        found = self.element.find(path)
        if found is None:
            self.missing.append(fact)
        return found

    def text(self, path: str, fact: str) -> str | None:
        found = self.find(path, fact)
        return None if found is None else found.text

    def first(self, fact: str, *paths: str) -> str | None:
        """The text of the first of several spellings (DTD versions) that the capture holds."""
        for path in paths:
            found = self.element.find(path)
            if found is not None:
                return found.text
        self.missing.append(fact)
        return None

    def facts(self) -> dict[str, Any]:
        facts = {
            "index": self.index,
            "lost": False,
            "accessible": True,
            **self.identity(),
            **self.state(),
            **self.health(),
        }
        self.missing += ["compute_capability", "inforom_valid", "nvlinks"]  # `-q` prints none of them
        facts["not_captured"] = sorted(set(self.missing))
        return facts

    def identity(self) -> dict[str, Any]:
        device_id = value(self.text("pci/pci_device_id", "pci_device_id"))
        return {
            "name": value(self.text("product_name", "name")),
            "uuid": value(self.text("uuid", "uuid")),
            "pci_bus_id": value(self.element.findtext("pci/pci_bus_id")) or self.element.get("id"),
            "pci_device_id": int(device_id, 16) if device_id and re.fullmatch(r"[0-9A-Fa-f]+", device_id) else None,
            "compute_capability": None,
            "memory_total_mib": integer(self.text("fb_memory_usage/total", "memory_total_mib")),
            "memory_used_mib": integer(self.text("fb_memory_usage/used", "memory_total_mib")),
            "virtualization_mode": value(self.element.findtext("gpu_virtualization_mode/virtualization_mode")),
            "driver_model": value(self.element.findtext("driver_model/current_dm")),
            "utilization": self.utilization(),
        }

    def utilization(self) -> dict[str, int] | None:
        """GPU and memory utilisation (%) of nvidia-smi's last sample; None where either is N/A."""
        gpu = integer(self.element.findtext("utilization/gpu_util"))
        memory = integer(self.element.findtext("utilization/memory_util"))
        return None if gpu is None or memory is None else {"gpu": gpu, "memory": memory}

    def state(self) -> dict[str, Any]:
        mode = (value(self.text("compute_mode", "compute_mode")) or "").lower()
        return {
            "persistence_mode": flag(self.text("persistence_mode", "persistence_mode")),
            "compute_mode": mode if mode in COMPUTE_MODES.values() else None,
            "mig_mode": self.mode("mig_mode", "current_mig", "pending_mig"),
            "mig_devices": self.mig_devices(),
            "inforom_valid": None,
            "fabric": self.fabric(),
            "processes": self.processes(),
        }

    def mode(self, section: str, current: str, pending: str) -> dict[str, bool] | None:
        """A current/pending mode pair (MIG, ECC), as the gateway gives it; None where N/A."""
        now = flag(self.text(f"{section}/{current}", section))
        later = flag(self.text(f"{section}/{pending}", section))
        return None if now is None else {"current": now, "pending": now if later is None else later}

    def mig_devices(self) -> list[dict[str, Any]] | None:
        found = self.element.find("mig_devices")
        if found is None:
            return None
        return [
            {
                "index": integer(device.findtext("index")),
                "gpu_instance_id": integer(device.findtext("gpu_instance_id")),
                "compute_instance_id": integer(device.findtext("compute_instance_id")),
                "memory_total_mib": integer(device.findtext("fb_memory_usage/total")),
            }
            for device in found.findall("mig_device")
        ]

    def fabric(self) -> dict[str, Any] | None:
        """The NVSwitch fabric registration (DTD v12 on). nvidia-smi prints NVML's enums as words; only "N/A"
        (no fabric) has been seen in a real capture, so other words are read by their plain meaning."""
        found = self.find("fabric", "fabric")
        if found is None:
            return None
        state = value(found.findtext("state"))
        if state is None:
            return None
        status = value(found.findtext("status"))
        health = found.find("health")
        return {
            "state": state.lower().replace(" ", "_"),
            "status": 0 if status is None or status.lower() == "success" else status,
            "health": fabric_health(health) if health is not None else {},
        }

    def processes(self) -> list[dict[str, Any]] | None:
        found = self.find("processes", "processes")
        if found is None:
            return None
        return [process(p) for p in found.findall("process_info")]

    def health(self) -> dict[str, Any]:
        return {
            "ecc_mode": self.mode("ecc_mode", "current_ecc", "pending_ecc"),
            "ecc_errors": self.ecc_errors(),
            "retired_pages": self.retired_pages(),
            "remapped_rows": self.remapped_rows(),
            "clock_event_reasons": self.clock_event_reasons(),
            **self.temperatures(),
            "power_limit_w": number(
                self.first(
                    "power_limit_w",
                    "gpu_power_readings/current_power_limit",
                    "power_readings/enforced_power_limit",
                    "power_readings/current_power_limit",
                )
            ),
            "power_default_limit_w": number(
                self.first(
                    "power_default_limit_w",
                    "gpu_power_readings/default_power_limit",
                    "power_readings/default_power_limit",
                )
            ),
            "pcie": self.pcie(),
            "nvlinks": [],
        }

    def temperatures(self) -> dict[str, int | None]:
        """The temperature, the T.Limit margin (degrees left), and the slowdown and shutdown thresholds. Newer
        drivers print the thresholds relative to T.Limit instead (gpu_temp_slow_tlimit_threshold: -2 C is 2 C
        past it): temperature + margin - offset is the absolute threshold, as NVML gives it (checked on an H100
        with driver 580: 51 C + 36 C - (-2 C) = 89 C, NVML's slowdown threshold on the same GPU)."""
        temp = integer(self.text("temperature/gpu_temp", "temperature_c"))
        margin = integer(self.text("temperature/gpu_temp_tlimit", "temperature_margin_c"))
        thresholds: dict[str, int | None] = {}
        for fact, absolute, relative in (
            ("temperature_slowdown_c", "gpu_temp_slow_threshold", "gpu_temp_slow_tlimit_threshold"),
            ("temperature_shutdown_c", "gpu_temp_max_threshold", "gpu_temp_max_tlimit_threshold"),
        ):
            found = self.element.find(f"temperature/{absolute}")
            offset = integer(self.element.findtext(f"temperature/{relative}"))
            if found is not None:
                thresholds[fact] = integer(found.text)
            elif temp is not None and margin is not None and offset is not None:
                thresholds[fact] = temp + margin - offset
            else:
                thresholds[fact] = None
                self.missing.append(fact)
        return {"temperature_c": temp, "temperature_margin_c": margin, **thresholds}

    def ecc_errors(self) -> dict[str, int | None]:
        """Volatile and aggregate counts, corrected and uncorrected: SRAM + DRAM (v11 on; v13 splits SRAM
        uncorrectable into parity and SEC-DED), or single_bit/double_bit totals (v10)."""
        found = self.find("ecc_errors", "ecc_errors")
        counts: dict[str, int | None] = {}
        for period in ("volatile", "aggregate"):
            section = found.find(period) if found is not None else None
            corrected, uncorrected = ecc_counts(section)
            counts[f"{period}_uncorrected"] = uncorrected
            counts[f"{period}_corrected"] = corrected
        return counts

    def retired_pages(self) -> dict[str, Any] | None:
        found = self.find("retired_pages", "retired_pages")
        if found is None:
            return None
        sbe = integer(found.findtext("multiple_single_bit_retirement/retired_count"))
        dbe = integer(found.findtext("double_bit_retirement/retired_count"))
        pending = flag(found.findtext("pending_retirement"))
        if sbe is None and dbe is None and pending is None:
            return None
        return {"sbe": sbe or 0, "dbe": dbe or 0, "pending": bool(pending)}

    def remapped_rows(self) -> dict[str, Any] | None:
        found = self.find("remapped_rows", "remapped_rows")
        if found is None or found.find("remapped_row_corr") is None:
            return None
        return {
            "correctable": integer(found.findtext("remapped_row_corr")) or 0,
            "uncorrectable": integer(found.findtext("remapped_row_unc")) or 0,
            "pending": bool(flag(found.findtext("remapped_row_pending"))),
            "failure": bool(flag(found.findtext("remapped_row_failure"))),
        }

    def clock_event_reasons(self) -> list[str] | None:
        section = self.element.find("clocks_event_reasons")
        prefix = "clocks_event_reason_"
        if section is None:
            section, prefix = self.element.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
        if section is None:
            self.missing.append("clock_event_reasons")
            return None
        states = {}
        for child in section:
            tag = child.tag.removeprefix(prefix)
            states[CLOCK_REASON_NAMES.get(tag, tag)] = flag(child.text)
        if all(state is None for state in states.values()):
            return None
        return [name for name in CLOCK_EVENT_REASONS.values() if states.get(name)]

    def pcie(self) -> dict[str, int | None]:
        link = "pci/pci_gpu_link_info/"
        gen = integer(self.text(link + "pcie_gen/current_link_gen", "pcie"))
        width = integer(self.text(link + "link_widths/current_link_width", "pcie"))
        max_gen = integer(self.text(link + "pcie_gen/max_link_gen", "pcie_max"))
        max_width = integer(self.text(link + "link_widths/max_link_width", "pcie_max"))
        return {
            "gen": gen,
            "max_gen": max_gen,
            "gpu_max_gen": integer(self.element.findtext(link + "pcie_gen/max_device_link_gen")),
            "width": width,
            "max_width": max_width,
            "replays": integer(self.element.findtext("pci/replay_counter")),
        }


def ecc_counts(section: ET.Element | None) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) of one period; None where the capture has no count for it."""
    if section is None:
        return None, None
    if section.find("single_bit") is not None:
        return integer(section.findtext("single_bit/total")), integer(section.findtext("double_bit/total"))
    corrected = [integer(child.text) for child in section if child.tag.endswith("_correctable")]
    uncorrected = [
        integer(child.text)
        for child in section
        if "_uncorrectable" in child.tag and child.tag.startswith(("sram", "dram"))
    ]
    return total(corrected), total(uncorrected)


def total(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def fabric_health(health: ET.Element) -> dict[str, bool | str | None]:
    """The health words as the gateway's decoded mask: True where nvidia-smi reports the problem."""
    summary = value(health.findtext("summary"))
    bandwidth = value(health.findtext("bandwidth"))
    configuration = value(health.findtext("incorrect_configuration"))
    return {
        "bandwidth_degraded": None if bandwidth is None else bandwidth.lower() == "degraded",
        "route_recovery": flag(health.findtext("route_recovery_in_progress")),
        "route_unhealthy": flag(health.findtext("route_unhealthy")),
        "access_timeout_recovery": flag(health.findtext("access_timeout_recovery")),
        "configuration": None if configuration is None else configuration.lower(),
        "summary": None if summary is None else summary.lower().replace(" ", "_"),
    }


def process(element: ET.Element) -> dict[str, Any]:
    """One <process_info>: the gateway's process entry, with the name nvidia-smi read on the node."""
    kinds = [PROCESS_KINDS[k] for k in (value(element.findtext("type")) or "C").replace("+", "") if k in PROCESS_KINDS]
    instances = [integer(element.findtext(k)) for k in ("gpu_instance_id", "compute_instance_id")]
    return {
        "pid": integer(element.findtext("pid")),
        "used_mib": integer(element.findtext("used_memory")),
        "kinds": kinds or ["compute"],
        "mig_instance": None if None in instances else instances,
        "name": value(element.findtext("process_name")),
    }
