"""The node_exporter textfile-collector format, through prometheus_client: one gauge family per metric
name in base units, labelled by check and by the GPU (NVML index, UUID, PCI bus id) or node a row is about;
a text figure (a version, an NCCL setting) as its own `<name>_info` series carrying the text in `value`;
every check's status, a `gpudoctor_info` series about the run, and the time of the run.

Whatever a check names its figures and labels, every name written is one Prometheus's classic text format
takes (node_exporter 1.5 rejects the whole file for one that is not, and with it every gpudoctor series),
and no figure takes the place of gpudoctor's own series or labels."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric

from gpudoctor.files import read_input, write_atomic
from gpudoctor.model import Status

PREFIX = "gpudoctor"
# A gauge figure whose family would be one of the run's own, or end as counters, histograms, summaries and
# info series do (promtool's lint refuses those on a gauge; `_info` is a text figure's), gets `_figure` after.
TYPED_SUFFIXES = ("_count", "_sum", "_bucket", "_total", "_created", "_info")
OWN_FAMILIES = {
    f"{PREFIX}_{name}"
    for name in ("check_status", "check_duration_seconds", "exit_code", "run_duration_seconds",
                 "last_run_timestamp_seconds", "info", "cause")
}  # fmt: skip
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
                _add_metric(samples, metric, where)
            for row in result["rows"]:
                place = {**where, **_row_labels(row)}
                for metric in row["metrics"]:
                    _add_metric(samples, metric, place)
        for cause in doc.get("causes") or []:
            samples.add(
                f"{PREFIX}_cause",
                "1 for each cause the diagnosis found, by its id and status (what is wrong behind the findings)",
                {"cause": cause["id"], "status": cause["status"]},
                1.0,
            )
        samples.add(f"{PREFIX}_exit_code", "The run's exit code (0 healthy, 1 a problem)", {}, doc["exit_code"])
        samples.add(f"{PREFIX}_run_duration_seconds", "How long the whole run took", {}, doc["duration_s"])
        stamp = datetime.fromisoformat(doc["started_at"]).timestamp()
        samples.add(f"{PREFIX}_last_run_timestamp_seconds", "When the run started (Unix time)", {}, stamp)
        info = InfoMetricFamily(PREFIX, "gpudoctor's version, the host and the level of the run")
        info.add_metric([], {k: _text(v) for k, v in versions.items()})
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


def _add_metric(samples: Samples, metric: dict[str, Any], where: dict[str, Any]) -> None:
    value, name = metric["value"], _metric_name(metric["name"])
    if isinstance(value, str):
        doc = f"gpudoctor's {name}, its text in the value label"
        samples.add(f"{PREFIX}_{name}_info", doc, _merged({**where, "value": value}, metric["labels"]), 1.0)
        return
    if value is None or isinstance(value, bool):
        return
    suffix, factor = BASE_UNITS.get(metric["unit"], ("", 1.0))
    family = f"{PREFIX}_{name}" + (f"_{suffix}" if suffix else "")
    family += "_figure" if family in OWN_FAMILIES or family.endswith(TYPED_SUFFIXES) else ""
    doc = f"gpudoctor's {name}" + (f" ({_text(metric['unit'])} in gpudoctor's report)" if metric["unit"] else "")
    samples.add(family, doc, _merged(where, metric["labels"]), float(value) * factor)


def _merged(where: dict[str, Any], labels: dict[str, Any]) -> dict[str, str]:
    """The series' labels: gpudoctor's (check, GPU, node...) and the figure's own, each name made a label
    name; a figure's label that would replace one of gpudoctor's is written `metric_<name>`, and two that
    become one name are told apart by `_2`, `_3`."""
    merged = {name: _text(value) for name, value in where.items()}
    for given, value in labels.items():
        name = _label_name(given)
        name = f"metric_{name}" if name in where else name
        base, n = name, 1
        while name in merged:
            n += 1
            name = f"{base}_{n}"
        merged[name] = _text(value)
    return merged


def _metric_name(name: str) -> str:
    """A metric name's part after `gpudoctor_`, in the classic charset (no colon: those are for rules)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name) or "figure"


def _label_name(name: str) -> str:
    """A label name Prometheus takes: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting `__` (reserved)."""
    word = re.sub(r"[^a-zA-Z0-9_]", "_", name) or "_"
    word = f"_{word}" if word[0].isascii() and word[0].isdigit() else word
    return f"label{word}" if word.startswith("__") else word


def _text(value: Any) -> str:
    """A label value as valid UTF-8 (a lone surrogate from undecodable bytes becomes `?`)."""
    return str(value).encode("utf-8", "replace").decode("utf-8", "replace") if value is not None else ""


def write(path: str, document: dict[str, Any]) -> None:
    """Atomically, through files.write_atomic (a fresh private temporary name, then a rename): a reader never
    sees half a file, and a link planted where prometheus_client's write_to_textfile puts its temporary file
    (`<file>.<pid>.<thread>`, opened without O_EXCL or O_NOFOLLOW) is never written through."""
    write_atomic(Path(path), render(document))


PROM_BYTES = 16 * 2**20  # node_exporter's textfiles are kilobytes


def rivals(path: str) -> list[str]:
    """Other .prom files beside `path` holding the run's own series with the same labels: node_exporter
    cannot serve both (it keeps one file's value of each series, whichever it read first)."""
    written = Path(path)
    ours = _run_series(written)
    found = []
    for other in sorted(written.parent.glob("*.prom")):
        if other.name != written.name and ours & _run_series(other):
            found.append(str(other))
    return found


def after_write(path: str) -> list[str]:
    """The format registry's look at a written file: a warning for each rival (see `rivals`)."""
    return [
        f"{other} also holds gpudoctor's series: node_exporter serves one file's values (perhaps the older) and "
        "logs the others' as 'collected before'; keep one gpudoctor file per folder"
        for other in rivals(path)
    ]


def _run_series(path: Path) -> set[str]:
    """The `gpudoctor_last_run_timestamp_seconds` series (name and labels) a textfile holds; nothing from a FIFO
    (its writer is not waited for), a device or a file too big to be node_exporter's."""
    if not path.is_file():
        return set()
    try:
        lines = read_input(path, "textfile", OSError, limit=PROM_BYTES).decode(errors="replace").splitlines()
    except OSError:  # unreadable, too big, or no longer a regular file
        return set()
    stamp = f"{PREFIX}_last_run_timestamp_seconds"
    return {line.rsplit(" ", 1)[0] for line in lines if line.startswith(stamp)}


def render(document: dict[str, Any]) -> str:
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReportCollector(document))
    return generate_latest(registry).decode()
