"""Seconds per MB and peak memory of `gpudoctor check --from` over every kind of paste it reads and over inputs
built to be slow, each judged whole by the real command in its own process.

Each case is written to a file of --mb megabytes: a reader family's samples (tests/fixtures/pastes/<family>,
repeated to the size) or a hostile shape (a line repeated: lines of two bytes, one line with no newline, lines
every reader takes a first look at, the shapes that once made a reader quadratic, some closed by a tail written
last). It prints, per case, the
wall seconds of the whole command (start-up, reading, judging, the JSON report), s/MB, the peak resident memory
(the child's own maxrss) and its ratio to the input, and the exit code (0/1 judged; 2 refused in one line).

    python bench/readers.py [--mb 8] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PASTES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pastes"

# name -> (a head written once, a piece repeated to the size[, a tail written last])
HOSTILE: dict[str, tuple[str, ...]] = {
    "2-byte lines": ("", "a\n"),
    "1-byte lines": ("", "\n"),
    "one line": ("", "x"),
    "# lines": ("# nThread 1 nGpus 1\n", "#\n"),
    "table rows": ("#       size         count      type   redop    root\n", "1 2 x\n"),
    "key: value lines": ("CA 'mlx5_0'\n", "Rate: 1\n"),
    "box lines": ("| Diagnostic | Result |\n", "|\n"),
    "NCCL lines": ("NCCL version 2.21.5+cuda12.4\n", "h:1:1 [0] NCCL INFO x\n"),
    "interfaces without port": ("x NCCL INFO NET/Socket : Using", " [0]eth0:10.0.0.1"),
    "cuDNN names unclosed": ("Unable to load any of ", "{libcudnn_cnn.so.9"),
    "open braces": ("", '{\n"dcgm": \n'),
    "conflicting collect_env": (
        "",
        "PyTorch version: 2.{n}.0\nIs CUDA available: True\nCUDA used to build PyTorch: 12.1\n",
    ),
    "digit runs": ("Xid (PCI:0000:3b:00): ", "9" * 5000 + " "),
    # issue 47: one long line, each once quadratic (80 KB: seconds)
    "cuDNN candidates unclosed": ("", "Unable to load any of {libcudnn"),
    "libtorch names": ("cannot open shared object file ", "libtorch_"),
    "row starts without fields": ("# nThread 1 nGpus 1\n", "1[1]1[1]Ax"),
    "nvbandwidth JSON hosts": ('{\n"nvbandwidth": {"GPU Device list": ["0: ', "x: (", '"]}}\n'),
    # issue 49: sentences (paste/prose.py)
    "GPU name words": ("", "NVIDIA GeForce RTX rtx 6000 Ada "),
    "torch words": ("", "torch torch: version is "),
    "driver words": ("", "driver version is "),
}


def cases(only: set[str]) -> Iterator[tuple[str, str, str, str]]:
    """(name, head, piece, tail) for each family of samples and each hostile shape."""
    for family in sorted(p for p in PASTES.iterdir() if p.is_dir()):
        if not only or family.name in only:
            files = sorted(f for f in family.rglob("*") if f.is_file())
            text = "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files) + "\n"
            yield family.name, "", text, ""
    for name, (head, piece, *tail) in HOSTILE.items():
        if not only or name in only:
            yield name, head, piece, "".join(tail)


def built(head: str, piece: str, size: int, tail: str = "") -> str:
    """The case as text of about `size` characters; `{n}` in a piece counts its repetitions."""
    if "{n}" not in piece:
        return head + piece * max(1, (size - len(head) - len(tail)) // len(piece)) + tail
    parts, length, n = [head], len(head), 0
    while length < size:
        parts.append(piece.replace("{n}", str(n)))
        length += len(parts[-1])
        n += 1
    return "".join(parts) + tail


def written(folder: Path, name: str, head: str, piece: str, size: int, tail: str = "") -> Path:
    path = folder / (name.replace(" ", "-").replace(":", "") + ".txt")
    path.write_text(built(head, piece, size, tail), encoding="utf-8")
    return path


def judged(path: Path) -> tuple[float, int, int]:
    """Wall seconds, peak resident KiB and exit code of `gpudoctor check --from path --format json`."""
    command = [sys.executable, "-m", "gpudoctor", "check", "--from", str(path), "--format", "json"]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=8.0, help="size of each input in MB (default 8)")
    parser.add_argument("--only", nargs="*", default=[], help="these cases only")
    args = parser.parse_args()
    size = int(args.mb * 2**20)
    print(f"{'case':26} {'MB':>5} {'s':>6} {'s/MB':>5} {'peak MB':>8} {'peak/in':>7} exit")
    with tempfile.TemporaryDirectory() as folder:
        for name, head, piece, tail in cases(set(args.only)):
            path = written(Path(folder), name, head, piece, size, tail)
            megabytes = path.stat().st_size / 2**20
            seconds, peak_kib, code = judged(path)
            peak = peak_kib / 1024
            print(
                f"{name:26} {megabytes:5.1f} {seconds:6.2f} {seconds / megabytes:5.2f} {peak:8.0f} "
                f"{peak / megabytes:7.1f} {code:>4}",
                flush=True,
            )
            path.unlink()


if __name__ == "__main__":
    main()
