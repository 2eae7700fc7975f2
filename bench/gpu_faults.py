"""The faults real GPU nodes have, made on the spot on one GPU, and what gpudoctor names first for each: the cause
(or the first problem) and the command it gives. About five minutes on one H100; prints a Markdown table for
docs/VALIDATION.md and, with --out, keeps every report and error text.

    python bench/gpu_faults.py [--gpu 0] [--out DIR]

Scenarios (each gpudoctor run is the installed `gpudoctor` on this machine):
  healthy             `check --level standard` on the idle GPU
  another computing   the same while another process runs bf16 GEMMs on the GPU (holding ~40 GiB)
  another holding     the same while another process holds 90 % of the GPU's memory and does nothing
  CVD empty           `check` with CUDA_VISIBLE_DEVICES=""
  CVD out of range    `check` with CUDA_VISIBLE_DEVICES naming an index past the last GPU
  CVD as a UUID       `check` with CUDA_VISIBLE_DEVICES=<the GPU's UUID> (nothing wrong)
and real errors produced by torch here, read back with `check --from`:
  OOM past the GPU    torch asked for more memory than the GPU has
  device-side assert  an index out of range in a CUDA kernel
  no GPU visible      torch.zeros(device="cuda") with CUDA_VISIBLE_DEVICES=""
  bogus NCCL ifname   a one-rank NCCL all-reduce with NCCL_SOCKET_IFNAME=bogus0 (NCCL_DEBUG=INFO)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

GPUDOCTOR = shutil.which("gpudoctor") or str(Path(sys.executable).with_name("gpudoctor"))
RUN_LIMIT_S = 240  # one gpudoctor run at most (the standard level took 67 s on an H100)

HOG = """
import sys, time, torch
mode, gib = sys.argv[1], float(sys.argv[2])
held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("ready", flush=True)
while True:
    if mode == "compute":
        torch.matmul(a, a)
    else:
        time.sleep(1)
"""
ERRORS = {
    "OOM past the GPU": ("import torch; torch.empty(2**44, dtype=torch.uint8, device='cuda')", {}),
    "device-side assert": (
        "import torch; t = torch.zeros(4, device='cuda'); t[torch.tensor([9], device='cuda')] = 1; "
        "torch.cuda.synchronize()",
        {},
    ),
    "no GPU visible": ("import torch; torch.zeros(1, device='cuda')", {"CUDA_VISIBLE_DEVICES": ""}),
    "bogus NCCL ifname": (
        "import os, torch, torch.distributed as d; os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29531');"
        "d.init_process_group('nccl', rank=0, world_size=1); x = torch.ones(1, device='cuda'); d.all_reduce(x); "
        "torch.cuda.synchronize()",
        {"NCCL_SOCKET_IFNAME": "bogus0", "NCCL_DEBUG": "INFO"},
    ),
}


def lead(document: dict[str, Any]) -> tuple[str, str, str]:
    """What a report names first, as "do this first" shows it: (the cause's id or the first problem's label, its
    line, its first command); "nothing wrong" where it names nothing."""
    for cause in document.get("causes") or []:
        if cause["status"] not in ("pass", "skip"):
            fix = cause.get("remediation") or {}
            return f"cause {cause['id']}", cause["summary"], (fix.get("commands") or ["-"])[0]
    order = {"fail": 0, "error": 0, "timeout": 0, "warn": 1}
    bad = [c for c in document["checks"] if c["status"] in order and not c.get("explained_by")]
    if not bad:
        return "nothing wrong", f"{document['status']}: {document['counts']}", "-"
    first = min(bad, key=lambda c: order[c["status"]])
    fix = first.get("remediation") or {}
    label = first["check_id"] + (f":{first['aspect']}" if first.get("aspect") else "")
    return label, first["summary"], (fix.get("commands") or ["-"])[0]


def gpudoctor(args: list[str], env: dict[str, str], keep: Path | None, name: str) -> dict[str, Any]:
    """One gpudoctor run's JSON report (its own exit code and wall time added)."""
    started = time.monotonic()
    proc = subprocess.run(
        [GPUDOCTOR, *args, "--json"], capture_output=True, text=True, env={**os.environ, **env}, timeout=RUN_LIMIT_S
    )
    try:
        document = json.loads(proc.stdout)
    except json.JSONDecodeError:
        document = {"status": "error", "counts": {}, "checks": [], "causes": [], "broke": proc.stderr[-2000:]}
    document["bench"] = {"exit": proc.returncode, "wall_s": round(time.monotonic() - started, 1)}
    if keep:
        (keep / f"{name}.json").write_text(json.dumps(document, indent=1))
    return document


@contextmanager
def hog(gpu: int, mode: str, gib: float) -> Iterator[None]:
    """Another process on the GPU: computing bf16 GEMMs, or only holding `gib` of its memory."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOG, mode, str(gib)],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", "the other process did not start"
        time.sleep(3)  # NVML's per-process samples cover the last seconds
        yield
    finally:
        proc.kill()
        proc.wait()


def produced(name: str, gpu: int, folder: Path) -> Path:
    """A real error torch prints here, saved as the file a user would paste."""
    code, env = ERRORS[name]
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "CUDA_LAUNCH_BLOCKING": "1", **env},
        timeout=120,
    )
    path = folder / f"{name.replace(' ', '-')}.txt"
    path.write_text(proc.stdout + proc.stderr)
    return path


def gpu_facts(gpu: int) -> tuple[str, int, float]:
    """The GPU's UUID, the number of GPUs, and its memory in GiB (nvidia-smi)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    rows = [line.split(", ") for line in out if line.strip()]
    mine = next(r for r in rows if int(r[0]) == gpu)
    return mine[1], len(rows), float(mine[2]) / 1024


def scenarios(gpu: int, keep: Path | None, scratch: Path) -> list[tuple[str, dict[str, Any]]]:
    uuid, count, gib = gpu_facts(gpu)
    one = {"CUDA_VISIBLE_DEVICES": str(gpu)}
    standard = ["check", "--level", "standard"]
    runs = [("healthy", gpudoctor(standard, one, keep, "healthy"))]
    with hog(gpu, "compute", min(40.0, gib * 0.5)):
        runs.append(("another computing", gpudoctor(standard, one, keep, "another-computing")))
    with hog(gpu, "hold", gib * 0.9):
        runs.append(("another holding", gpudoctor(standard, one, keep, "another-holding")))
    for name, value in (("CVD empty", ""), ("CVD out of range", str(count)), ("CVD as a UUID", uuid)):
        runs.append((name, gpudoctor(["check"], {"CUDA_VISIBLE_DEVICES": value}, keep, name.replace(" ", "-"))))
    for name in ERRORS:
        pasted = produced(name, gpu, keep or scratch)
        runs.append((name, gpudoctor(["check", "--from", str(pasted)], {}, keep, f"from-{name.replace(' ', '-')}")))
    return runs


def table(runs: list[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        "| scenario | exit | status | named first | its line | its command | s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, document in runs:
        first, said, command = lead(document)
        bench = document.get("bench", {})
        cells = [name, bench.get("exit"), document.get("status"), first, said, f"`{command}`", bench.get("wall_s")]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--out", type=Path, help="keep every report and error text here")
    args = parser.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        runs = scenarios(args.gpu, args.out, Path(scratch))
    text = table(runs)
    print(text)
    print(f"\n{len(runs)} scenarios in {time.monotonic() - started:.0f} s")
    if args.out:
        (args.out / "gpu-faults.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
