"""A `-q` GPU section as the `<gpu>` element `nvidia-smi -q -x` prints for it, read by facts/nvsmi_xml.Gpu: `-q`
holds what `-q -x` holds, laid out as an indented "Key : Value" tree, so a field read from either means the same.
What a GPU's section lacks (a `-q -d` subset, an older driver) is not recorded; the caller marks it not captured."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

from gpudoctor.facts import nvsmi_xml
from gpudoctor.paste.nvsmi.state import BUS_ID, Node, QueryGpu, bus_id

LINK = "pci/pci_gpu_link_info/"
# `-q` paths (normalised keys from the GPU section down) and the `-q -x` element each is printed as, for the
# elements nvsmi_xml reads.
Q_ELEMENTS = {
    ("product_name",): "product_name",
    ("gpu_uuid",): "uuid",
    ("persistence_mode",): "persistence_mode",
    ("compute_mode",): "compute_mode",
    ("mig_mode", "current"): "mig_mode/current_mig",
    ("mig_mode", "pending"): "mig_mode/pending_mig",
    ("ecc_mode", "current"): "ecc_mode/current_ecc",
    ("ecc_mode", "pending"): "ecc_mode/pending_ecc",
    ("driver_model", "current"): "driver_model/current_dm",
    ("gpu_virtualization_mode", "virtualization_mode"): "gpu_virtualization_mode/virtualization_mode",
    ("pci", "bus_id"): "pci/pci_bus_id",
    ("pci", "device_id"): "pci/pci_device_id",
    ("pci", "gpu_link_info", "pcie_generation", "max"): LINK + "pcie_gen/max_link_gen",
    ("pci", "gpu_link_info", "pcie_generation", "current"): LINK + "pcie_gen/current_link_gen",
    ("pci", "gpu_link_info", "pcie_generation", "device_max"): LINK + "pcie_gen/max_device_link_gen",
    ("pci", "gpu_link_info", "link_width", "max"): LINK + "link_widths/max_link_width",
    ("pci", "gpu_link_info", "link_width", "current"): LINK + "link_widths/current_link_width",
    ("pci", "replays_since_reset"): "pci/replay_counter",
    ("fb_memory_usage", "total"): "fb_memory_usage/total",
    ("fb_memory_usage", "used"): "fb_memory_usage/used",
    ("utilization", "gpu"): "utilization/gpu_util",
    ("utilization", "memory"): "utilization/memory_util",
    ("retired_pages", "single_bit_ecc"): "retired_pages/multiple_single_bit_retirement/retired_count",
    ("retired_pages", "double_bit_ecc"): "retired_pages/double_bit_retirement/retired_count",
    ("retired_pages", "pending"): "retired_pages/pending_retirement",
    ("retired_pages", "pending_page_blacklist"): "retired_pages/pending_retirement",
    ("retired_pages", "pending_page_retirement"): "retired_pages/pending_retirement",
    ("remapped_rows",): "remapped_rows",
    ("remapped_rows", "correctable_error"): "remapped_rows/remapped_row_corr",
    ("remapped_rows", "uncorrectable_error"): "remapped_rows/remapped_row_unc",
    ("remapped_rows", "pending"): "remapped_rows/remapped_row_pending",
    ("remapped_rows", "remapping_failure_occurred"): "remapped_rows/remapped_row_failure",
    ("temperature", "gpu_current_temp"): "temperature/gpu_temp",
    ("temperature", "gpu_t_limit_temp"): "temperature/gpu_temp_tlimit",
    ("temperature", "gpu_current_t_limit_temp"): "temperature/gpu_temp_tlimit",
    ("temperature", "gpu_shutdown_temp"): "temperature/gpu_temp_max_threshold",
    ("temperature", "gpu_slowdown_temp"): "temperature/gpu_temp_slow_threshold",
    ("temperature", "gpu_shutdown_t_limit_temp"): "temperature/gpu_temp_max_tlimit_threshold",
    ("temperature", "gpu_slowdown_t_limit_temp"): "temperature/gpu_temp_slow_tlimit_threshold",
    ("power_readings", "enforced_power_limit"): "power_readings/enforced_power_limit",
    ("power_readings", "default_power_limit"): "power_readings/default_power_limit",
    ("power_readings", "current_power_limit"): "power_readings/current_power_limit",
    ("gpu_power_readings", "current_power_limit"): "gpu_power_readings/current_power_limit",
    ("gpu_power_readings", "default_power_limit"): "gpu_power_readings/default_power_limit",
    ("gpu_power_readings", "gpu_ceiling_power_limit", "current_power_limit"): "gpu_power_readings/current_power_limit",
    ("gpu_power_readings", "gpu_ceiling_power_limit", "default_power_limit"): "gpu_power_readings/default_power_limit",
    ("fabric",): "fabric",
    ("fabric", "state"): "fabric/state",
    ("fabric", "status"): "fabric/status",
    ("fabric", "health", "summary"): "fabric/health/summary",
    ("fabric", "health", "bandwidth"): "fabric/health/bandwidth",
    ("fabric", "health", "route_recovery_in_progress"): "fabric/health/route_recovery_in_progress",
    ("fabric", "health", "route_unhealthy"): "fabric/health/route_unhealthy",
    ("fabric", "health", "access_timeout_recovery"): "fabric/health/access_timeout_recovery",
    ("fabric", "health", "incorrect_configuration"): "fabric/health/incorrect_configuration",
}
# "Clocks Event Reasons" (R535 on) and "Clocks Throttle Reasons" (before): `-q` names -> the gateway's.
CLOCK_SECTIONS = {"clocks_event_reasons": "clocks_event_reason_", "clocks_throttle_reasons": "clocks_throttle_reason_"}
CLOCK_NAMES = {"idle": "gpu_idle"}
# Facts nvsmi_xml gives for an element it does not list as missing when absent: recorded only where there.
NEEDS_ELEMENT = {
    "memory_total_mib": "fb_memory_usage/total",
    "memory_used_mib": "fb_memory_usage/used",
    "mig_devices": "mig_devices",
    "virtualization_mode": "gpu_virtualization_mode/virtualization_mode",
    "driver_model": "driver_model/current_dm",
    "utilization": "utilization/gpu_util",
}
NEVER_PRINTED = ("compute_capability", "inforom_valid", "nvlinks", "not_captured", "index")


def walk(root: Node) -> Iterator[tuple[tuple[str, ...], Node]]:
    """Every node under `root` with its path of keys, in the order printed."""
    pending: list[tuple[tuple[str, ...], Node]] = [((child.key,), child) for child in reversed(root.children)]
    while pending:
        path, node = pending.pop()
        yield path, node
        pending.extend(((*path, child.key), child) for child in reversed(node.children))


def put(parent: ET.Element, path: str, text: str | None) -> None:
    """Sets the element at `path` under `parent` (made as needed) to `text`, unless it already has one."""
    node = parent
    for tag in path.split("/"):
        child = node.find(tag)
        node = child if child is not None else ET.SubElement(node, tag)
    if node.text is None and text:
        node.text = text


def gpu_element(query: QueryGpu) -> ET.Element:
    """A `-q` GPU section as the <gpu> element `-q -x` prints for it (the elements nvsmi_xml reads)."""
    gpu = ET.Element("gpu", {"id": query.bus})
    for path, node in walk(query.tree):
        target = Q_ELEMENTS.get(path)
        if target:
            put(gpu, target, device_id(node.value) if path == ("pci", "device_id") else node.value)
        elif path[0] == "ecc_errors" and len(path) > 1:
            put(gpu, "/".join(path), node.value)
        elif path[0] in CLOCK_SECTIONS and len(path) > 1:
            prefix = CLOCK_SECTIONS[path[0]]
            put(gpu, f"{path[0]}/{prefix}{CLOCK_NAMES.get(path[-1], path[-1])}", node.value)
    children = query.tree.children
    if any(child.key == "processes" for child in children):
        processes(gpu, next(child for child in children if child.key == "processes"))
    if any(child.key == "mig_mode" for child in children):
        mig_devices(gpu, [child for child in children if child.key in ("mig_device", "mig_devices")])
    return gpu


def device_id(text: str | None) -> str | None:
    """`-q`'s "0x233010DE" as `-q -x`'s "233010DE"."""
    return text[2:] if text and text.lower().startswith("0x") else text


def processes(gpu: ET.Element, section: Node) -> None:
    """The Processes section: "GPU instance ID" and "Compute instance ID" lines, then "Process ID" with its
    Type, Name and Used GPU Memory indented under it; "None" where no process holds the GPU."""
    element = ET.SubElement(gpu, "processes")
    instances: dict[str, str | None] = {}
    for child in section.children:
        if child.key in ("gpu_instance_id", "compute_instance_id"):
            instances[child.key] = child.value
        elif child.key == "process_id":
            info = ET.SubElement(element, "process_info")
            for tag in ("gpu_instance_id", "compute_instance_id"):
                ET.SubElement(info, tag).text = instances.pop(tag, None)
            ET.SubElement(info, "pid").text = child.value
            details = {d.key: d.value for d in child.children}
            ET.SubElement(info, "type").text = details.get("type")
            ET.SubElement(info, "process_name").text = details.get("name")
            ET.SubElement(info, "used_memory").text = details.get("used_gpu_memory")


def mig_devices(gpu: ET.Element, sections: list[Node]) -> None:
    """The MIG Device sections (after MIG Mode; none where MIG is off) as <mig_devices>."""
    element = ET.SubElement(gpu, "mig_devices")
    for section in sections:
        for device in [section] if section.key == "mig_device" else section.children:
            if device.key != "mig_device":
                continue
            entry = ET.SubElement(element, "mig_device")
            for child in device.children:
                if child.key in ("index", "gpu_instance_id", "compute_instance_id"):
                    put(entry, child.key, child.value)
                elif child.key in ("fb_memory_usage", "shared_fb_memory_usage"):
                    total = next((c.value for c in child.children if c.key == "total"), None)
                    put(entry, "fb_memory_usage/total", total)


def query_facts(query: QueryGpu) -> dict[str, Any]:
    """The GPU facts nvsmi_xml reads from the same section printed by `-q -x`, less what the section lacks."""
    element = gpu_element(query)
    reader = nvsmi_xml.Gpu(element, query.position)
    facts = reader.facts()
    missing = set(reader.missing)
    kept = {
        name: value
        for name, value in facts.items()
        if name not in NEVER_PRINTED
        and (element.find(NEEDS_ELEMENT[name]) is not None if name in NEEDS_ELEMENT else name not in missing)
    }
    if isinstance(kept.get("pci_bus_id"), str) and re.fullmatch(BUS_ID, kept["pci_bus_id"]):
        kept["pci_bus_id"] = bus_id(kept["pci_bus_id"])
    if "pcie" in missing:
        kept.pop("pcie", None)
    errors = kept.pop("ecc_errors", None)
    if errors is not None:
        kept.update({f"ecc_errors.{name}": count for name, count in errors.items()})
    return kept
