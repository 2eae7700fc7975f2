"""The samples in the README and the docs are real runs: each code block after a `<!-- sample: ... -->` comment
is what its `$ gpudoctor ...` line prints today, on the file the comment names, copied under the name the
command uses. `python tests/helpers/docsamples.py` rewrites them; tests/test_docs.py fails where one is stale.

    <!-- sample: tests/fixtures/nvidia-smi-xml/tesla-t4.xml as t4.xml -->
    <!-- sample: cluster 1000 as rank0.json -->        (tests/helpers/clusterreport.py's synthetic report)
    <!-- sample: ... live -->                          (a live run: only its verdicts are compared)
    <!-- sample: tests/fixtures/... -->                (the file under its own path)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "REPORTS.md", ROOT / "docs" / "OFFLINE.md"]
MARK = re.compile(
    r"<!-- sample: (?P<source>\S+(?: \d+)?)(?: as (?P<name>\S+))?(?P<live> live)? -->\n```\n(?P<block>.*?)```", re.S
)
WIDTH = 110
TIMING = re.compile(r" in \d+\.\d s ")
VERDICT = re.compile(r"^(PASS|WARN|FAIL|skip|error)\s+(\S+)", re.M)


@dataclass
class Sample:
    document: Path
    source: str
    name: str
    live: bool
    block: str
    span: tuple[int, int]

    @property
    def command(self) -> str:
        return next(line for line in self.block.splitlines() if line.startswith("$ gpudoctor "))

    def run(self) -> str:
        """The block as a run today prints it: the lines before the command as they are, then its output."""
        before = self.block.split(self.command, 1)[0]
        with tempfile.TemporaryDirectory() as folder:
            self._place(Path(folder))
            env = {**os.environ, "COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}
            gpudoctor = Path(sys.executable).with_name("gpudoctor")
            args = shlex.split(self.command.removeprefix("$ gpudoctor "))
            proc = subprocess.run([str(gpudoctor), *args], capture_output=True, text=True, cwd=folder, env=env)
        return f"{before}{self.command}\n{proc.stdout}"

    def _place(self, folder: Path) -> None:
        if self.source.startswith("cluster "):
            sys.path.insert(0, str(ROOT / "tests"))
            from helpers.clusterreport import build

            (folder / self.name).write_text(json.dumps(build(int(self.source.split()[1]))))
        else:
            (folder / self.name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / self.source, folder / self.name)


def samples() -> Iterator[Sample]:
    for document in DOCUMENTS:
        text = document.read_text()
        for found in MARK.finditer(text):
            live = bool(found.group("live"))
            name = found["name"] or found["source"]
            yield Sample(document, found["source"], name, live, found["block"], found.span("block"))


def same(shown: str, now: str, live: bool) -> bool:
    """The block is today's output: exactly, but for the run's duration; a live run's by its verdicts."""
    if live:
        return VERDICT.findall(shown) == VERDICT.findall(now)
    return TIMING.sub(" in _ s ", shown) == TIMING.sub(" in _ s ", now)


def write() -> None:
    for document in DOCUMENTS:
        text = document.read_text()
        for sample in sorted((s for s in samples() if s.document == document), key=lambda s: -s.span[0]):
            start, end = sample.span
            text = text[:start] + sample.run() + text[end:]
        document.write_text(text)


if __name__ == "__main__":
    write()
