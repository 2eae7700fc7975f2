"""nvidia-smi's text outputs read into the NVML facts the judges read, one module per output: the default table
(table.py, with the MIG devices and Processes boxes under it in boxes.py), `-L` (listing.py), `topo -m` and
`topo -p2p r` (topo.py), `-q` (query.py, its GPU sections read as `-q -x` by query_xml.py), and the one-line
answers that say NVML did not start or counts no GPU (status.py). state.py holds what they share: the facts
recorded, the GPU index by bus id and UUID, and what waits for the end of the paste.

This module is the entry: one pass over the lines that may start an output, each handed to its output's module,
then what could only be settled once the whole paste was read."""

from __future__ import annotations

from gpudoctor.paste.found import Found
from gpudoctor.paste.nvsmi import boxes, listing, query, status, table, topo
from gpudoctor.paste.nvsmi.state import MAX_GPUS, MAX_LINE, Paste, clean

__all__ = ["MAX_GPUS", "Reader", "read"]

# Every line that starts an nvidia-smi output holds one of these.
TRIGGERS = ("GPU", "NVIDIA-SMI", "NVML", "NVSMI", "No devices", "MIG devices", "Processes:")


def read(found: Found) -> None:
    """Every nvidia-smi output in the paste, as facts."""
    Reader(found).run()


class Reader(Paste):
    """One pass over the paste's lines; each output kind is read from the line that starts it."""

    def run(self) -> None:
        after = 0
        for i in self.found.holding(TRIGGERS):
            if i >= after and len(self.lines[i]) <= MAX_LINE:
                after = max(i + 1, self.dispatch(i, self.lines[i]))
        self.finish()

    def dispatch(self, i: int, raw: str) -> int:
        """Reads the output that starts at line `i`, if one does; the index of the next line to look at."""
        if "NVIDIA-SMI" in raw:
            if not status.smi_failure(self, i, clean(raw)):
                table.header(self, i, clean(raw))
        elif status.NVML_INIT in raw:
            status.nvml_failure(self, i, clean(raw))
        elif status.NO_DEVICES in raw and clean(raw).strip() == status.NO_DEVICES:
            status.no_devices(self, i)
        elif query.Q_BANNER in raw or ("GPU " in raw and raw.lstrip().startswith("GPU ")):
            return self.gpu_line(i, clean(raw))
        elif any(h in raw for h in table.COLUMN_HEADERS):
            return table.read(self, i)
        elif "MIG devices:" in raw:
            return boxes.mig_box(self, i)
        elif "Processes:" in raw and "|" in raw:
            return boxes.processes_box(self, i)
        elif "GPU0" in raw:
            return topo.read(self, i, clean(raw))
        return i + 1

    def gpu_line(self, i: int, line: str) -> int:
        """A `-L` line, or the start of a `-q` output (its banner, or a GPU section header without it)."""
        if listing.starts(line):
            return listing.read(self, i)
        if query.starts(self, i, line):
            return query.read(self, i)
        return i + 1

    def finish(self) -> None:
        """In this order: `-q` sections at their index, `-L`'s MIG devices where nothing else gives them, what the
        table shows in part, the topology's missing matrices and NUMA nodes."""
        query.finish(self)
        listing.finish(self)
        for weak in self.weak:
            self.settle(weak)
        topo.finish(self)
