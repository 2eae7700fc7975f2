"""In compute.sdc's ranks (one per GPU, or gloo ranks on the CPU) and cluster.sdc's (every GPU of every node):
fixed operations on fixed inputs, each repeated; every repeat against the first, bit for bit; rows of the first
against the same operation in fp64 on the CPU, within its error bound (gpudoctor/judging/sdc.py); then the digests
exchanged, and the output of the commonest digest of each kind sent to every rank that differs from it, to say where.

Run on its own, it reruns one case on one device: the reproduction a vendor is handed (the inputs are the same on
every machine, so a healthy GPU of the model prints the digest its peers had).

    CUDA_VISIBLE_DEVICES=GPU-<uuid> python -m gpudoctor.checks.ranks.sdc --case gemm-bf16 --repeats 20
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import importlib.metadata
import json
import math
import os
import platform
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gpudoctor.api import RankContext
from gpudoctor.judging import sdc

WORKSPACE = ":4096:8"  # one size of cuBLAS workspace buffers: PyTorch's reproducibility notes' setting
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
INTS = {"fp32": torch.int32, "bf16": torch.int16, "fp16": torch.int16}
STEPS = 2**24  # inputs are multiples of 2^-24: exact in fp64, rounded to each precision on the CPU alike everywhere
# The convolution: n // 256 images of 64 channels, 56 x 56 (a ResNet stage), 256 3x3 filters at stride 2.
IMAGE, FILTERS = (64, 56, 56), (256, 64, 3, 3)
NOT_DETERMINISTIC = "deterministic"  # in torch's RuntimeError for an operation with no deterministic kernel


def deterministic() -> None:
    """The same bits on every run of an operation, as PyTorch's reproducibility notes ask ("Reproducibility",
    docs.pytorch.org/docs/stable/notes/randomness.html): deterministic algorithms only, cuDNN's without benchmarking,
    and cuBLAS workspaces of one size (CUBLAS_WORKSPACE_CONFIG, which torch reads when it first sets up cuBLAS: the
    launcher's ranks have made no cuBLAS call before this, and on its own this runs before CUDA starts). fp32 stays
    fp32 (no TF32 in the convolution) and the 16-bit GEMMs sum in fp32 (no reduced-precision reductions): the bound
    assumes both."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", WORKSPACE)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


@contextmanager
def tf32(on: bool) -> Iterator[None]:
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def grid(shape: tuple[int, ...], seed: int, low: float, high: float) -> Any:
    """Multiples of 2^-24 in [low, high), fp64 on the CPU, from a seeded generator of integers (a float
    generator's vectorised paths differ between CPUs; integers and their exact quotients do not)."""
    generator = torch.Generator().manual_seed(seed)
    steps = torch.randint(0, round((high - low) * STEPS), shape, generator=generator, dtype=torch.int64)
    return steps.double() / STEPS + low


@functools.lru_cache(maxsize=1)  # the four GEMMs, one after another, share theirs
def operands(kind: str, n: int, seed: int) -> tuple[Any, ...]:
    """The fixed inputs of an operation of `kind` at size n (never changed in place: each use converts a copy)."""
    if kind == "gemm":
        return grid((n, n), seed, -1.0, 1.0), grid((n, n), seed + 1, -1.0, 1.0)
    if kind == "sum":
        return (grid((n, n), seed + 2, -1.0, 1.0),)
    if kind == "conv":
        return grid((max(1, n // 256), *IMAGE), seed + 3, -1.0, 1.0), grid(FILTERS, seed + 4, -1.0, 1.0)
    return (grid((n, n), seed + 5, 0.5, 2.0),)


def apply(kind: str, inputs: list[Any]) -> Any:
    """The operation: a matrix product, row sums, a strided convolution, or sigmoid(1.5 x + 0.75) x + 0.75."""
    if kind == "gemm":
        return torch.matmul(inputs[0], inputs[1])
    if kind == "sum":
        return inputs[0].sum(dim=-1)
    if kind == "conv":
        return F.conv2d(inputs[0], inputs[1], stride=2, padding=1)
    x = inputs[0]
    return torch.sigmoid(x * 1.5 + 0.75) * x + 0.75


def depth(kind: str, inputs: list[Any]) -> int:
    """How many terms each output sums."""
    if kind == "conv":
        return math.prod(inputs[1].shape[1:])
    return int(inputs[0].shape[-1]) if kind in ("gemm", "sum") else 1


def unsupported(precision: str, device: Any) -> str | None:
    """Why this device has no such precision, else None."""
    if device.type != "cuda":
        return "TF32 is a GPU format: on the CPU it is fp32" if precision == "tf32" else None
    if precision == "tf32" and torch.cuda.get_device_capability(device) < (8, 0):
        return "no TF32 before compute capability 8.0"
    if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
        return "no native bf16 on this GPU"
    return None


def bits(tensor: Any, storage: str) -> Any:
    return tensor.contiguous().view(-1).view(INTS[storage])


def value(pattern: int, storage: str) -> float:
    return float(torch.tensor([pattern], dtype=INTS[storage]).view(DTYPES[storage]).item())


def located(index: int, got: int, expected: int, storage: str) -> dict[str, Any]:
    """A difference at flat `index`: both values from their bit patterns, and their distance in ULPs."""
    return {
        "index": index,
        "got": value(got, storage),
        "expected": value(expected, storage),
        "ulps": sdc.ulps(got, expected, storage),
    }


def difference(got: Any, expected: Any, storage: str) -> dict[str, Any] | None:
    """The first element whose bits differ, or None where every bit is the same."""
    a, b = bits(got, storage), bits(expected, storage)
    if torch.equal(a, b):
        return None
    index = int((a != b).nonzero()[0])
    return located(index, int(a[index]), int(b[index]), storage)


def flip(out: Any, storage: str) -> None:
    """The test hook's fault (GPUDOCTOR_INJECT_FAULT=rank=R,kind=corrupt,at=sdc CASE[ repeat K]): one bit of one
    element, the lowest exponent bit of the largest, which doubles or halves it."""
    flat = bits(out, storage)
    index = int(out.detach().reshape(-1).abs().argmax())
    flat[index] ^= 1 << sdc.FORMATS[storage].fraction


def digest(tensor: Any) -> str:
    """The digest of the output's bytes, read where they lie in host memory."""
    host = tensor.detach().contiguous().cpu()
    size = host.numel() * host.element_size()
    return sdc.digest((ctypes.c_char * size).from_address(host.data_ptr()))


def reference(kind: str, precision: str, exact: list[Any], rows: Any) -> tuple[Any, Any, str]:
    """The operation in fp64 on the CPU over rows `rows` of the first input (the same rounded inputs the device
    had), and the bound of each element of it (what it may differ by, and the bound's name)."""
    picked = [exact[0][rows].double(), *(t.double() for t in exact[1:])]
    expected = apply(kind, picked)
    scale = expected if kind == "chain" else apply(kind, [t.abs() for t in picked])
    bound = sdc.tolerance(kind, precision, depth(kind, picked))
    return expected, bound.allowed(scale, expected), bound.source


def against_reference(kind: str, precision: str, exact: list[Any], out: Any, cap: int) -> dict[str, Any]:
    """Every k-th row of the output along its first dimension (at most `cap`; images of the convolution, at most
    cap / 16) against the fp64 reference: the largest share of its bound any element used, and the first element
    beyond it."""
    storage = sdc.PRECISIONS[precision].storage
    lead = out.shape[0]
    rows = torch.arange(0, lead, max(1, math.ceil(lead / max(1, cap // 16 if kind == "conv" else cap))))
    expected, allowed, source = reference(kind, precision, exact, rows)
    got = out[rows.to(out.device)].double().cpu()
    error = (got - expected).abs()
    share = (error / allowed).nan_to_num(nan=math.inf).max()
    found: dict[str, Any] = {"checked": got.numel(), "bound": source, "share": float(share)}
    beyond = (~(error <= allowed)).reshape(-1).nonzero()
    if len(beyond):
        i = int(beyond[0])
        per_row = math.prod(out.shape[1:])
        got_bits, expected_bits = (
            int(bits(t.reshape(-1)[i : i + 1].to(DTYPES[storage]), storage)[0]) for t in (got, expected)
        )
        found["beyond"] = {
            **located(int(rows[i // per_row]) * per_row + i % per_row, got_bits, expected_bits, storage),
            "expected": float(expected.reshape(-1)[i]),
            "allowed": float(allowed.reshape(-1)[i]),
        }
    return found


def within_bound(name: str, p: dict[str, Any], found: dict[str, Any], shape: list[int]) -> dict[str, bool]:
    """Whether each of two values at the first element where two ranks differ (`got`, `expected`) is within the
    bound of the fp64 reference: where the two are alone, this says which is wrong."""
    kind, precision = sdc.CASES[name]
    exact = [t.to(DTYPES[sdc.PRECISIONS[precision].storage]) for t in operands(kind, p["n"], p["seed"])]
    per_row = math.prod(shape[1:])
    expected, allowed, _ = reference(kind, precision, exact, torch.tensor([found["index"] // per_row]))
    at = found["index"] % per_row
    truth, bound = float(expected.reshape(-1)[at]), float(allowed.reshape(-1)[at])
    return {which: abs(found[which] - truth) <= bound for which in ("got", "expected")}


def run_case(
    name: str, p: dict[str, Any], device: Any, corrupt: Callable[[int], bool], seconds: Counter[str]
) -> tuple[dict[str, Any], Any]:
    """One case on this device: its repeats, the first's digest and its reference rows; and the first output
    (None where the case could not run here, with the reason)."""
    kind, precision = sdc.CASES[name]
    storage = sdc.PRECISIONS[precision].storage
    result: dict[str, Any] = {"case": name, "repeats": p["repeats"]}
    if reason := unsupported(precision, device):
        return {**result, "not_judged": reason}, None
    exact = [t.to(DTYPES[storage]) for t in operands(kind, p["n"], p["seed"])]  # rounded on the CPU: same bits
    inputs = [t.to(device) for t in exact]
    first = None
    mark = time.perf_counter()
    try:
        for repeat in range(p["repeats"]):
            with tf32(precision == "tf32"):
                out = apply(kind, inputs)
            if corrupt(repeat):
                flip(out, storage)
            if first is None:
                first = out
            elif "repeat_diff" not in result and (diff := difference(out, first, storage)):
                result["repeat_diff"] = {"repeat": repeat, **diff}
    except RuntimeError as exc:
        if NOT_DETERMINISTIC not in str(exc):
            raise
        return {**result, "not_judged": str(exc).strip().splitlines()[0][:200]}, None
    mark = lap(seconds, "compute", mark)
    result |= {"shape": list(first.shape), "digest": digest(first)}
    mark = lap(seconds, "digest", mark)
    if p["reference_rows"]:
        result["reference"] = against_reference(kind, precision, exact, first, p["reference_rows"])
    lap(seconds, "reference", mark)
    return result, first


def lap(seconds: Counter[str], phase: str, since: float) -> float:
    """Adds the time since `since` to `phase`; the time now."""
    now = time.perf_counter()
    seconds[phase] += now - since
    return now


def kind_of(device: Any) -> dict[str, str]:
    """What must be the same for two ranks to owe each other the same bits: the device model and SM count, and the
    software (cuBLAS Library User Guide, "Results reproducibility": the same toolkit, architecture and SM count)."""
    software = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "cudnn": str(torch.backends.cudnn.version()),
    }
    if device.type != "cuda":
        return {"device": "cpu", "capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
                **software}  # fmt: skip
    props = torch.cuda.get_device_properties(device)
    return {
        "device": props.name,
        "capability": f"{props.major}.{props.minor}",
        "sms": str(props.multi_processor_count),
        "driver": driver_release(),
        "cublas": cublas_release(),
        **software,
    }


def driver_release() -> str:
    """The loaded NVIDIA kernel module's release, as /proc says it ("" where it does not)."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as file:
            text = file.read(4096)
    except OSError:
        return ""
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else ""


def cublas_release() -> str:
    """The pip-installed cuBLAS's release, where cuBLAS came from pip ("" otherwise)."""
    for name in ("nvidia-cublas", "nvidia-cublas-cu12", "nvidia-cublas-cu11"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def uuid_of(device: Any) -> str | None:
    """The GPU's UUID as CUDA_VISIBLE_DEVICES takes it ("GPU-..."), None on the CPU."""
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    text = str(getattr(props, "uuid", "") or "")
    if not text or text.startswith(("GPU-", "MIG-")):
        return text or None
    return f"{'MIG' if ' MIG ' in props.name else 'GPU'}-{text}"


def output_shape(kind: str, n: int) -> tuple[int, ...]:
    """An operation's output shape, for a rank that did not run it but takes part in sending it."""
    if kind == "sum":
        return (n,)
    if kind == "conv":
        return (max(1, n // 256), FILTERS[0], IMAGE[1] // 2, IMAGE[2] // 2)
    return (n, n)


def compare_with_peers(
    ctx: RankContext, kind: dict[str, str], results: dict[str, Any], outputs: dict[str, Any]
) -> None:
    """Every rank's kind and digests to every rank (as numbers in one tensor: nothing from another rank is
    unpickled); then, for each case where ranks of one kind differ, the commonest output sent to them, and each
    says where its own first differs."""
    names = list(sdc.CASES)
    mine = [sdc.kind_code(kind), *(sdc.code(results[name].get("digest", "")) for name in names)]
    row = torch.tensor(mine, dtype=torch.int64, device=ctx.device)
    gathered = [torch.empty_like(row) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, row)
    table = [t.tolist() for t in gathered]
    for column, name in enumerate(names, start=1):
        case_kind, precision = sdc.CASES[name]
        storage = sdc.PRECISIONS[precision].storage
        for source, differing in sdc.sources(table, column):
            ctx.phase(f"sdc locate {name} from rank {source}")
            theirs = outputs[name] if ctx.rank == source else None
            if theirs is None:
                theirs = torch.empty(output_shape(case_kind, ctx.params["n"]), dtype=DTYPES[storage], device=ctx.device)
            dist.broadcast(theirs.view(-1).view(torch.uint8), src=source)
            found = difference(outputs[name], theirs, storage) if ctx.rank in differing else None
            if found:
                within = within_bound(name, ctx.params, found, list(theirs.shape))
                results[name]["peer"] = {"source": source, **found, "within": within}


def worker(ctx: RankContext) -> dict[str, Any]:
    """Every case on this rank's device, then the digests compared with every other rank's."""
    deterministic()
    results: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    seconds: Counter[str] = Counter()
    for name in sdc.CASES:

        def corrupt(repeat: int, name: str = name) -> bool:
            phase = f"sdc {name} repeat {repeat}"
            ctx.phase(phase)
            return ctx.fault_here(phase, "corrupt")

        results[name], outputs[name] = run_case(name, ctx.params, ctx.device, corrupt, seconds)
    kind = kind_of(ctx.device)
    started = time.perf_counter()
    compare_with_peers(ctx, kind, results, outputs)
    lap(seconds, "compare", started)
    return {
        "rank": ctx.rank,
        "cuda_index": ctx.device.index if ctx.device.type == "cuda" else None,
        "uuid": uuid_of(ctx.device),
        "kind": kind,
        "cases": list(results.values()),
        "seconds": dict(seconds),
    }


def main(argv: list[str] | None = None) -> int:
    """One case on one device, printed as JSON; exit 1 where its repeats differ or it is beyond its bound."""
    deterministic()
    parser = argparse.ArgumentParser(
        prog="python -m gpudoctor.checks.ranks.sdc",
        description="Rerun one compute.sdc case on one device (CUDA_VISIBLE_DEVICES picks the GPU), with the inputs "
        "every GPU computes on: its digest, whether its repeats agree, how it stands against the fp64 reference.",
    )
    parser.add_argument("--case", choices=list(sdc.CASES), required=True)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--n", type=int, default=0, help="size (0: 4096 on a GPU, 256 on the CPU)")
    parser.add_argument("--seed", type=int, default=sdc.SEED)
    parser.add_argument("--reference-rows", type=int, default=64)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if min(args.repeats, args.seed + 1, args.reference_rows + 1) < 1 or args.n < 0:
        parser.error("--repeats must be at least 1; --n, --seed and --reference-rows at least 0")
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    params = {
        "n": args.n or sdc.SIZES[args.device],
        "repeats": args.repeats,
        "seed": args.seed,
        "reference_rows": args.reference_rows,
    }
    result, _ = run_case(args.case, params, device, lambda repeat: False, Counter())
    print(json.dumps({"kind": kind_of(device), **result}, indent=2))
    failed = "repeat_diff" in result or "beyond" in result.get("reference", {})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
