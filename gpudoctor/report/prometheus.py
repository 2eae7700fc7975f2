"""The node_exporter textfile-collector format, through prometheus_client: one gauge family per metric
name in base units, labelled by check and by the GPU (NVML index, UUID, PCI bus id) or node a row is about;
every check's status, a `gpudoctor_info` series with the versions, and the time of the run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric

from gpudoctor.model import Status

PREFIX = "gpudoctor"
# gpudoctor's units -> (the base unit's name suffix, factor to the base unit)
BASE_UNITS = {
    "GB/s": ("bytes_per_second", 1e9),
    "TFLOP/s": ("flops_per_second", 1e12),
    "MiB": ("bytes", 2**20),
    "GiB": ("bytes", 2**30),
    "ms": ("seconds", 1e-3),
    "us": ("seconds", 1e-6),
    "s": ("seconds", 1.0),
    "C": ("celsius", 1.0),
    "W": ("watts", 1.0),
    "img/s": ("images_per_second", 1.0),
}


class Samples:
    """Gauge samples gathered by family name; a family's label names are the union of its samples'."""

    def __init__(self) -> None:
        self.families: dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]] = {}

    def add(self, name: str, doc: str, labels: dict[str, Any], value: float) -> None:
        _, samples = self.families.setdefault(name, (doc, {}))
        samples[tuple(sorted((k, "" if v is None else str(v)) for k, v in labels.items()))] = value

    def collect(self) -> Iterator[Metric]:
        for name, (doc, samples) in sorted(self.families.items()):
            names = sorted({k for key in samples for k, _ in key})
            family = GaugeMetricFamily(name, doc, labels=names)
            for key, value in samples.items():
                given = dict(key)
                family.add_metric([given.get(n, "") for n in names], value)
            yield family


class ReportCollector:
    """A gpudoctor report (the JSON document) as Prometheus metric families."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def collect(self) -> Iterator[Metric]:
        doc = self.document
        samples = Samples()
        versions = {"tool_version": doc["tool_version"], "host": doc["host"], "level": doc["level"]}
        for result, node in _results(doc):
            where = {"check": result["check_id"], "aspect": result["aspect"] or "", **({"node": node} if node else {})}
            for status in Status:
                samples.add(
                    f"{PREFIX}_check_status",
                    "1 for the check's status (pass, warn, fail, skip, error, timeout), 0 for the others",
                    {**where, "status": status.value},
                    float(result["status"] == status.value),
                )
            samples.add(f"{PREFIX}_check_duration_seconds", "How long the check ran", where, result["duration_s"])
            for metric in result["metrics"]:
                _add_metric(samples, metric, where, versions)
            for row in result["rows"]:
                place = {**where, **_row_labels(row)}
                for metric in row["metrics"]:
                    _add_metric(samples, metric, place, versions)
        samples.add(f"{PREFIX}_exit_code", "The run's exit code (0 healthy, 1 a problem)", {}, doc["exit_code"])
        samples.add(f"{PREFIX}_run_duration_seconds", "How long the whole run took", {}, doc["duration_s"])
        stamp = datetime.fromisoformat(doc["started_at"]).timestamp()
        samples.add(f"{PREFIX}_last_run_timestamp_seconds", "When the run started (Unix time)", {}, stamp)
        info = InfoMetricFamily(PREFIX, "gpudoctor's version and the node's driver, CUDA, torch and NCCL")
        info.add_metric([], {k: str(v) for k, v in versions.items()})
        yield info
        yield from samples.collect()


def _results(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    """Every result with the node it ran on: rank 0's cluster report also carries every node's own checks,
    and every series of those is labelled with its node (else the nodes' series would overwrite each other,
    and a failing node could hide behind a passing one)."""
    results: list[tuple[dict[str, Any], str | None]] = [(result, None) for result in doc["checks"]]
    for node in (doc.get("cluster") or {}).get("nodes", []):
        results += [(result, node["name"]) for result in node["checks"]]
    return results


def _row_labels(row: dict[str, Any]) -> dict[str, Any]:
    """The GPU (NVML index, as nvidia-smi numbers it; UUID; PCI bus id) or node the row is about."""
    given = {
        "gpu": row["index"],
        "uuid": row["uuid"],
        "pci_bus_id": row["pci_bus_id"],
        "node": row.get("node"),
        "peer": row.get("peer"),
    }
    return {k: v for k, v in given.items() if v is not None}


def _add_metric(samples: Samples, metric: dict[str, Any], where: dict[str, Any], versions: dict[str, Any]) -> None:
    value = metric["value"]
    if isinstance(value, str):
        versions[metric["name"]] = value  # versions and other text go to gpudoctor_info
        return
    if value is None or isinstance(value, bool):
        return
    suffix, factor = BASE_UNITS.get(metric["unit"], ("", 1.0))
    name = f"{PREFIX}_{metric['name']}" + (f"_{suffix}" if suffix else "")
    doc = f"gpudoctor's {metric['name']}" + (f" ({metric['unit']} in gpudoctor's report)" if metric["unit"] else "")
    samples.add(name, doc, {**where, **metric["labels"]}, float(value) * factor)


def write(path: str, document: dict[str, Any]) -> None:
    """Atomically (a temporary file in the same folder, then a rename): a reader never sees half a file."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReportCollector(document))
    write_to_textfile(path, registry)


def render(document: dict[str, Any]) -> str:
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReportCollector(document))
    return generate_latest(registry).decode()
