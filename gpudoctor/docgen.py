"""The check table of docs/CHECKS.md and the settings table of docs/CONFIG.md, made from the check declarations,
and the API table of docs/PLUGINS.md, made from gpudoctor.api's one list of names; and the package's index of
the declarations (gpudoctor/data/declarations.json), which `gpudoctor list` reads instead of parsing them.

Tables written by hand drift from the code; these are rewritten from what each built-in check declares (its
id, level, fact sources, time limit, docstring and settings with their defaults), so they cannot.
`python -m gpudoctor.docgen` rewrites the text between each table's marker comments; `--check` changes
nothing and exits 1 when a committed table differs from what the declarations make now (tests/test_docs.py
asserts it does not). Discovery imports the check modules, which import torch only inside functions, so this
runs without torch being imported.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor import api
from gpudoctor.config import LARGEST, PER_CHECK_COMMON, value_range
from gpudoctor.declarations import INDEX, index_text
from gpudoctor.registry import CheckSpec, discover

# This checkout's docs where gpudoctor runs from one (an editable install), else the current folder's: installed
# from a wheel, the package has no docs beside it (run it from the checkout's root).
BESIDE = Path(__file__).resolve().parents[1] / "docs"
DOCS = BESIDE if BESIDE.is_dir() else Path("docs")
COMMAND = "python -m gpudoctor.docgen"
MIB = 2**20
# The reference training run's settings, which ddp.train and cluster.ddp both declare.
REFERENCE_RUN = {
    "model": "torchvision model trained (empty: resnet50 on GPUs, resnet18 on the CPU)",
    "batch_size": "images per GPU per step (0: 128 on GPUs, 8 on the CPU); halved until it fits",
    "image_size": "image side in pixels (0: 224 on GPUs, 64 on the CPU)",
    "precision": "`bf16`, `fp16` (with loss scaling) or `fp32` (empty: bf16, fp16 on GPUs without "
    "bf16, fp32 on the CPU)",
    "steps": "training steps (0: 60 on GPUs, 12 on the CPU, × 4 at `--level full`)",
    "min_loss_drop": "the loss must fall by at least this fraction from the first quarter of the steps to the last",
    "grad_tolerance": "largest relative difference from the single-process gradient (0: by precision)",
    "min_scaling": "on GPUs, the synchronised step's speed must reach this fraction of the slowest GPU's own",
    "scaling": "measure each GPU's own speed too, to name a slow GPU and judge scaling",
    "floor": "unused while the throughput has no published reference (none was measured as this run "
    "trains): it is judged against a saved baseline only, at `baseline_tolerance`",
}
# What each setting means: by name, or by "check-id setting" where one check reads it its own way. A check that
# declares a setting named in neither is an error here, so a new setting cannot reach the docs unexplained.
MEANINGS = {
    "baseline_tolerance": "with `--baseline`, a figure passes from this fraction of the saved node's figure",
    "cpu_ranks": "ranks started when the workload runs on the CPU (gloo)",
    "expected_gbps": "an absolute reference for one node's link in GB/s (0: none): below `floor` × it fails, "
    "whatever the other nodes measure, so a slow majority is caught too",
    "fail_fraction": "a node or link below this fraction of its reference (after the noise allowance, and "
    "confirmed by a re-test where there is one) fails and is drained",
    "floor": "a figure passes from 0.85 of its reference (the published healthy figure, else the topology or "
    "datasheet), warns down to this fraction of it, and fails below",
    "iters": "timed repetitions (× 4 at `--level full`)",
    "n": "the matrices' size: n × n times n × n",
    "straggler_fraction": "a node or link below this fraction of its reference (after the noise allowance) is "
    "named a straggler: a warning, never drained",
    "warmup": "untimed repetitions before the timed ones",
    "system.shm min_gib": "/dev/shm smaller than this (GiB) warns: DataLoader workers die with 'Bus error'",
    "system.memory min_gib_per_gpu": "host memory per GPU (GiB) below this warns",
    "system.memory min_cpus_per_gpu": "usable CPU cores per GPU below this warns",
    "system.limits min_nofile": "an open-files limit below this warns",
    "health.ecc correctable_warn": "more volatile correctable ECC errors than this warn (uncorrectable ones "
    "always fail)",
    "health.retired-pages max_pages": "this many retired pages or more fail (DCGM's limit)",
    "health.temperature margin_c": "a GPU fewer than this many °C below its slowdown threshold (or T.Limit) warns",
    "health.power min_fraction": "a power limit below this fraction of the default limit warns",
    "health.pcie replay_warn": "more PCIe replays than this warn",
    "health.nvlink error_warn": "an active link with more CRC, replay and recovery errors than this warns",
    "allreduce.bandwidth min_busbw_gbps": "your own pass line for the largest message's busbw in GB/s (0: "
    "judged against the published figure or the topology instead)",
    "p2p.access bytes": "bytes per peer copy",
    "bandwidth.device-memory bytes": "bytes per device-to-device copy",
    "bandwidth.host-device bytes": "bytes per host-device copy",
    "memory.test share": "share of free GPU memory tested",
    "memory.test full_share": "the largest share at `--level full` (which tests four times `share`)",
    "memory.test walking_bits": "walking-bit patterns written (× 4 at `--level full`, at most 32)",
    "memory.test seed": "seed of the random pattern",
    **{f"{check} {key}": text for check in ("ddp.train", "cluster.ddp") for key, text in REFERENCE_RUN.items()},
    **{
        f"{check} {key}": text
        for check in ("compute.sdc", "cluster.sdc")
        for key, text in {
            "n": "the size of every operation: n × n GEMMs, sums and elementwise chains, a stride-2 convolution over "
            "n / 256 images (0: 4096 on GPUs, whose 4096² outputs are 512 tiles of 256 × 128, more than any GPU has "
            "SMs; 256 on the CPU)",
            "seed": "seed of the fixed inputs: every GPU of every node computes on the same numbers",
        }.items()
    },
    "compute.sdc repeats": "times each operation runs on each GPU, every run bit for bit the first (× 4 at `--level "
    "full`, at least 2)",
    "compute.sdc reference_rows": "rows of each output checked against the fp64 CPU reference, spread evenly (a "
    "sixteenth as many images of the convolution; 0: none)",
    "cluster.sdc cpu_ranks": "ranks per node when the workload runs on the CPU (gloo)",
    "load.concurrent seconds": "seconds every GPU is loaded (× 4 at `--level full`)",
    "load.concurrent window_s": "length of one timed window of GEMMs, in seconds",
    "load.concurrent sample_s": "how often NVML is read during the load, in seconds",
    "cluster.nodes join_timeout": "seconds rank 0 waits for every node to join",
    "cluster.nodes report_timeout": "seconds rank 0 waits for the nodes' own reports (0: `--timeout`, else "
    "120 s at quick and 30 min at standard)",
    "cluster.links bytes": "the largest transfer (0: 256 MiB on GPUs, 16 MiB on CPUs); a slow pair's is "
    "smaller, sized from a probe",
    "cluster.links iters": "timed repetitions over both passes (× 4 at `--level full`)",
    "cluster.links floor": "below this fraction of `expected_gbps` or a baseline fails",
    "cluster.allreduce cpu_ranks": "ranks per node when the workload runs on the CPU (gloo)",
    "cluster.allreduce pair_bytes": "bytes of each node pair's all-reduce (0: 256 MiB on GPUs, 4 MiB on CPUs)",
    "cluster.ddp cpu_ranks": "ranks per node when the workload runs on the CPU (gloo)",
    "cluster.ddp min_scaling": "accepted as `ddp.train`'s, so one table serves both; a cluster run judges no scaling",
}


class DocgenError(Exception):
    """A marker is missing from a document, or a declared setting has no meaning written here."""


@dataclass(frozen=True)
class Table:
    """One generated table: its name in the markers and the document it lives in."""

    name: str
    document: str
    made_from: str = "the check declarations"

    @property
    def begin(self) -> str:
        return f"<!-- BEGIN {self.name}: made by `{COMMAND}` from {self.made_from}; do not edit -->"

    @property
    def end(self) -> str:
        return f"<!-- END {self.name} -->"


CHECKS_TABLE, SETTINGS_TABLE = Table("check table", "CHECKS.md"), Table("settings table", "CONFIG.md")
API_TABLE = Table("API table", "PLUGINS.md", "gpudoctor.api's names")


def builtin_specs() -> list[CheckSpec]:
    """The built-in checks in report order; plugins and site checks (`GPUDOCTOR_CHECKS_DIR`) are not documented
    here."""
    return [spec for spec in discover(entry_points=False).specs if spec.source == "builtin"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _sources(spec: CheckSpec) -> str:
    needs = ", ".join(f"`{n}`" for n in spec.needs) or "nothing"
    return needs + (f"; reads {', '.join(f'`{u}`' for u in spec.uses)}" if spec.uses else "")


def check_table(specs: list[CheckSpec]) -> str:
    """Every check: id, level, what it checks (its docstring's whole first sentence, as `gpudoctor list` shows
    it), the facts and conditions it needs, and its time limit."""
    rows = ["| check | level | what it checks | needs | time limit |", "| --- | --- | --- | --- | --- |"]
    for spec in specs:
        what = _cell(spec.description)
        rows.append(f"| `{spec.id}` | {spec.level} | {what} | {_sources(spec)} | {spec.timeout_s:g} s |")
    return "\n".join(rows)


def _default(key: str, value: Any) -> str:
    """The default as it is written in TOML, with a byte count's size in MiB beside it."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    written = f"`{value:g}`" if isinstance(value, float) else f"`{value}`"
    return f"{written} ({value / MIB:g} MiB)" if key.endswith("bytes") and value >= MIB else written


def _kind(key: str, default: Any) -> str:
    """The type the config accepts, as config.validate_checks checks it, with a number's allowed range."""
    if isinstance(default, bool):
        return "boolean"
    if isinstance(default, str):
        return "string"
    low, high = value_range(key)
    return f"number >= {low:g}" if high == LARGEST else f"number {low:g}..{high:g}"


def meaning(spec: CheckSpec, key: str) -> str:
    """What the setting means for this check; an error for one nobody explained."""
    found = MEANINGS.get(f"{spec.id} {key}") or MEANINGS.get(key)
    if not found:
        raise DocgenError(f"{spec.id} declares setting {key!r}, which gpudoctor/docgen.py's MEANINGS does not explain")
    return found


def settings_table(specs: list[CheckSpec]) -> str:
    """Every setting of every check: its `[checks.ID]` key, type, default and meaning."""
    rows = ["| check | setting | type | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for spec in specs:
        for key, default in spec.settings.items():
            if key in PER_CHECK_COMMON:
                continue
            cells = (f"`{spec.id}`", f"`{key}`", _kind(key, default), _default(key, default), meaning(spec, key))
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def api_table() -> str:
    """Every name a check may import from gpudoctor.api and the module it comes from (read from api's list,
    nothing imported)."""
    rows = ["| name | from |", "| --- | --- |"]
    rows += [f"| `{name}` | `{api.PROVIDERS[name]}` |" for name in api.__all__]
    return "\n".join(rows)


def tables(specs: list[CheckSpec] | None = None) -> dict[Table, str]:
    specs = builtin_specs() if specs is None else specs
    return {CHECKS_TABLE: check_table(specs), SETTINGS_TABLE: settings_table(specs), API_TABLE: api_table()}


def replace_between(text: str, table: Table, body: str) -> str:
    """The document with the text between the table's markers replaced by `body`."""
    start, stop = text.find(table.begin), text.find(table.end)
    if start < 0 or stop < start:
        markers = f"{table.begin} ... {table.end}"
        raise DocgenError(f"docs/{table.document} lacks the markers of the {table.name} ({markers})")
    return f"{text[: start + len(table.begin)]}\n{body}\n{text[stop:]}"


def _regenerated(docs: Path) -> list[tuple[Path, str, str]]:
    """Each document with a generated table (one table each), and the package's index of the declarations that
    `list` reads (declarations.INDEX): its path, its text now, and its text made afresh."""
    found = []
    for table, body in tables().items():
        path = docs / table.document
        old = _read(path)
        found.append((path, old, replace_between(old, table, body)))
    old_index = INDEX.read_text(encoding="utf-8") if INDEX.is_file() else ""
    return [*found, (INDEX, old_index, index_text())]


def stale(docs: Path = DOCS) -> list[str]:
    """The documents whose generated tables differ from what the declarations make now."""
    return [path.name for path, old, new in _regenerated(docs) if new != old]


def write(docs: Path = DOCS) -> list[str]:
    """Rewrite every generated table; the documents that changed."""
    changed = []
    for path, old, new in _regenerated(docs):
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(path.name)
    return changed


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise DocgenError(f"cannot read {path}: {exc.strerror} (run it from a checkout)") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table is out of date")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder (default: this checkout's)")
    args = parser.parse_args(argv)
    try:
        out_of_date = stale(args.docs) if args.check else write(args.docs)
    except DocgenError as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    if args.check and out_of_date:
        print(f"out of date: {', '.join(out_of_date)}; run `{COMMAND}`", file=sys.stderr)
        return 1
    print(f"rewrote {', '.join(out_of_date)}" if out_of_date else "the tables are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
