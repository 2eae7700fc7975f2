"""Silent data corruption, pure (compute.sdc on one node, cluster.sdc across nodes; the ranks' code is
checks/ranks/sdc.py): the operations and their precisions, the error bound each output keeps to against an fp64
reference, the distance between two floats in ULPs, and the verdict on every rank's repeats, digests and reference.

The bound. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM 2002, ch. 3: a dot product of
length n computed in floating point, in any order, is within gamma_n |x|.|y| of the exact one, gamma_n = n u /
(1 - n u) (Lemma 3.1, eq. 3.5); a matrix product within gamma_n |A||B| elementwise (eq. 3.13); a sum of n terms
within gamma_(n-1) sum |x_i| (ch. 4, eq. 4.4). u is taken as a chopped unit (one ULP relative, 2^-23 for fp32, twice
round-to-nearest's): tensor cores accumulate with truncation (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior
of NVIDIA tensor cores", PeerJ Computer Science 7:e330, 2021), and on an IEEE round-to-nearest path the bound is only
twice as wide as it must be. TF32 rounds the fp32 inputs to 10 fraction bits first (each product then within
(1 + 2^-10)^2 of the exact one); bf16 and fp16 results are rounded from the fp32 accumulator once more (one ULP of
their own, relative to the result). A worst-case bound never fails a healthy run whatever its data; what it cannot
see is an error smaller than itself, which the bitwise comparisons of repeats and peers catch instead.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.model import places
from gpudoctor.text import harmless


@dataclass(frozen=True)
class Format:
    """A stored floating-point format: its width in bits, and the spacing of its values at zero (its smallest
    subnormal: what an underflowing result may be off by)."""

    width: int
    fraction: int  # stored fraction bits: the lowest exponent bit is the next one up
    tiny: float


FORMATS = {"fp32": Format(32, 23, 2.0**-149), "bf16": Format(16, 7, 2.0**-133), "fp16": Format(16, 10, 2.0**-24)}


@dataclass(frozen=True)
class Precision:
    """What a precision stores, what rounding its inputs to the multiplier's format may change (relative), and what
    rounding the fp32 accumulator to the stored result may change (relative; 0 where it is stored as accumulated)."""

    storage: str
    inputs: float
    output: float


ACCUMULATE = 2.0**-23  # fp32's chopped unit: every accumulation is fp32 (reduced-precision reductions are off)
PRECISIONS = {
    "fp32": Precision("fp32", 0.0, 0.0),
    "tf32": Precision("fp32", 2.0**-10, 0.0),
    "bf16": Precision("bf16", 0.0, 2.0**-7),
    "fp16": Precision("fp16", 0.0, 2.0**-10),
}
# The operations, in the order they run: (kind, precision). A GEMM in every precision training uses, a reduction, a
# strided convolution (cuDNN's FFT and Winograd algorithms need a filter stride of 1, so a direct or GEMM-like one
# computes it: cuDNN API reference, cudnnConvolutionForward's supported configurations), an elementwise chain.
CASES = {
    "gemm-fp32": ("gemm", "fp32"),
    "gemm-tf32": ("gemm", "tf32"),
    "gemm-bf16": ("gemm", "bf16"),
    "gemm-fp16": ("gemm", "fp16"),
    "sum-fp32": ("sum", "fp32"),
    "conv-fp32": ("conv", "fp32"),
    "chain-fp32": ("chain", "fp32"),
}
# The elementwise chain sigmoid(1.5 x + 0.75) x + 0.75 on x in [0.5, 2): every value positive, every step's relative
# condition number at most 1.3, so each rounding is worth one ULP of the result at most: 2 for 1.5 x + 0.75, 4 for the
# sigmoid (1 / (1 + exp(-v)): expf is within 2 ULPs, CUDA C++ Programming Guide, "Mathematical Functions"; torch's CPU
# exp, SLEEF's u10, within 1), 1 for the product, 1 for the sum: 8.6 with the condition numbers, counted as 16.
CHAIN_ULPS = 16
SIZES = {"cuda": 4096, "cpu": 256}  # n: 4096^2 outputs are 512 tiles of 256 x 128, more than any GPU has SMs
SEED = 2026


def gamma(n: int, unit: float) -> float:
    """Higham's gamma_n = n u / (1 - n u); infinite where n u >= 1 (the bound then says nothing)."""
    return n * unit / (1 - n * unit) if n * unit < 1 else math.inf


@dataclass(frozen=True)
class Tolerance:
    """What an output element may differ from its fp64 reference by: `on_scale` times the magnitude term (|A||B|,
    sum |x|, |W|*|X|), `on_value` times the reference's own magnitude, and `absolute` (an underflow)."""

    on_scale: float
    on_value: float
    absolute: float
    source: str

    def allowed(self, scale: Any, value: Any) -> Any:
        """The bound for each element (numbers or tensors alike)."""
        return self.on_scale * scale + self.on_value * abs(value) + self.absolute


def tolerance(kind: str, precision: str, depth: int) -> Tolerance:
    """The bound of an operation of `kind` in `precision` whose every output sums `depth` terms (the GEMM's inner
    dimension, the reduction's length, the convolution's C_in x kh x kw); the chain's per element."""
    spec = PRECISIONS[precision]
    tiny = FORMATS[spec.storage].tiny
    if kind == "chain":
        return Tolerance(0.0, (1 + ACCUMULATE) ** CHAIN_ULPS - 1, tiny, f"{CHAIN_ULPS} fp32 ULPs of the result")
    grown = (1 + spec.inputs) ** 2
    accumulated = gamma(depth, ACCUMULATE) * grown + grown - 1
    rounded = f" + {spec.storage} rounding" if spec.output else ""
    return Tolerance(accumulated * (1 + spec.output), spec.output, tiny, f"gamma_{depth} |terms|{rounded}")


def ulps(a: int, b: int, storage: str) -> int:
    """How many representable values of the stored format lie between two bit patterns (signed or not), counting
    across zero: +0 and -0 are 0 apart."""
    width = FORMATS[storage].width
    return abs(_ordered(a, width) - _ordered(b, width))


def _ordered(bits: int, width: int) -> int:
    bits &= (1 << width) - 1
    magnitude = bits & ((1 << (width - 1)) - 1)
    return -magnitude if bits >> (width - 1) else magnitude


def unravel(flat: int, shape: list[int]) -> list[int]:
    """A flat (row-major) index as one index per dimension."""
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return index[::-1]


DIGEST = re.compile(r"[0-9a-f]{16}")


def digest(data: Any) -> str:
    """The digest of an output's bytes (64 bits of SHA-256: one flipped bit changes it)."""
    import hashlib  # in the rank that computed the output: a run that only plans this check never loads OpenSSL

    return hashlib.sha256(data).hexdigest()[:16]


def code(digest_text: str) -> int:
    """A digest as a signed 64-bit number, as the ranks exchange them in a tensor (0: none)."""
    value = int(digest_text, 16) if digest_text else 0
    return value - 2**64 if value >= 2**63 else value


def kind_code(kind: dict[str, str]) -> int:
    """A rank's kind (device model, SM count, software) as one number, equal exactly where the kinds are."""
    return code(digest(json.dumps(kind, sort_keys=True).encode()))


def sources(table: list[list[int]], column: int) -> list[tuple[int, list[int]]]:
    """Which rank's output each disagreeing rank is compared with element by element: in each group of ranks of one
    kind (`table[rank][0]`), the lowest rank holding the commonest digest (`table[rank][column]`, 0: none) and the
    ranks whose digest differs from it. Every rank computes the same plan from the same table."""
    groups: dict[int, list[int]] = {}
    for rank, row in enumerate(table):
        if row[column]:
            groups.setdefault(row[0], []).append(rank)
    plan = []
    for ranks in groups.values():
        counts = Counter(table[r][column] for r in ranks)
        if len(counts) > 1:
            best = max(counts.values())
            source = next(r for r in ranks if counts[table[r][column]] == best)
            plan.append((source, [r for r in ranks if table[r][column] != table[source][column]]))
    return sorted(plan)


# --- the verdict on every rank's data ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """What one rank got wrong in one case. `sure`: blamed on this rank (its own repeats, the reference, or a
    majority of its peers); not sure: one of several that disagree with no majority to tell which is right."""

    rank: int
    case: str
    text: str
    sure: bool = True


@dataclass
class Judged:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was not judged, and why
    compared: set[str] = field(default_factory=set)  # the cases every judged rank ran

    def of(self, rank: int) -> list[Finding]:
        return [f for f in self.findings if f.rank == rank]


def judge(ranks: list[dict[str, Any]], label: Callable[[int], str]) -> Judged:
    """Every rank's repeats and reference rows (its own), then its digests against its peers of the same kind: same
    device model, SM count and software, the conditions under which cuBLAS promises the same bits (cuBLAS Library
    User Guide, "Results reproducibility"). `label(rank)` names a rank: "GPU 3", "rank 2 on node-2"."""
    judged = Judged()
    usable = [r for r in ranks if _well_formed(r)]
    judged.notes += [
        f"{label(r.get('rank'))}: sent no result" for r in ranks if isinstance(r, dict) and r not in usable
    ]
    for rank in usable:
        for case in _cases(rank):
            judged.findings += _own(rank["rank"], case)
            judged.compared.add(case["case"])
    judged.notes += _not_judged(usable, label)
    _peers(usable, label, judged)
    return judged


def _well_formed(rank: Any) -> bool:
    return (
        isinstance(rank, dict)
        and isinstance(rank.get("rank"), int)
        and isinstance(rank.get("kind"), dict)
        and isinstance(rank.get("cases"), list)
    )


def _cases(rank: dict[str, Any]) -> list[dict[str, Any]]:
    """The rank's well-formed cases that ran (a digest and the output's shape), in CASES order."""
    found = {c["case"]: c for c in rank["cases"] if isinstance(c, dict) and c.get("case") in CASES}
    return [found[name] for name in CASES if name in found and _ran(found[name])]


def _ran(case: dict[str, Any]) -> bool:
    shape = case.get("shape")
    return (
        isinstance(case.get("digest"), str)
        and DIGEST.fullmatch(case["digest"]) is not None
        and isinstance(shape, list)
        and all(isinstance(size, int) and size > 0 for size in shape)
    )


def _own(rank: int, case: dict[str, Any]) -> list[Finding]:
    name, findings = case["case"], []
    repeat = case.get("repeat_diff")
    if isinstance(repeat, dict):
        text = f"{name}: repeat {repeat.get('repeat')} differs from repeat 0, {_element(repeat, case)}"
        findings.append(Finding(rank, name, text))
    reference = case.get("reference")
    beyond = reference.get("beyond") if isinstance(reference, dict) else None
    if _located(beyond) and isinstance(beyond.get("allowed"), int | float):
        text = (
            f"{name} (repeat 0): element {_index(beyond, case)} is {beyond['got']:.9g}, the fp64 reference "
            f"{beyond['expected']:.9g}: off by {abs(beyond['got'] - beyond['expected']):.3g}, beyond its bound "
            f"{beyond['allowed']:.3g} ({beyond['ulps']} ULPs)"
        )
        findings.append(Finding(rank, name, text))
    return findings


def _index(found: dict[str, Any], case: dict[str, Any]) -> str:
    return str(unravel(int(found["index"]), list(case["shape"])))


def _element(found: Any, case: dict[str, Any], whose: str = "") -> str:
    """`first at element [i, j] (got vs expected, N ULPs)`, or that the rank could not say where."""
    if not _located(found):
        return "not located"
    return (
        f"first at element {_index(found, case)} ({found['got']:.9g} vs {whose}{found['expected']:.9g}, "
        f"{found['ulps']} ULPs)"
    )


def _located(found: Any) -> bool:
    """A difference as the ranks report it: a flat index, both values and their distance in ULPs."""
    numbers = ("got", "expected")
    return (
        isinstance(found, dict)
        and all(isinstance(found.get(k), int) for k in ("index", "ulps"))
        and all(isinstance(found.get(k), int | float) for k in numbers)
    )


def _not_judged(ranks: list[dict[str, Any]], label: Callable[[int], str]) -> list[str]:
    """Each case some ranks did not run, with the reason they gave (a kernel with no deterministic implementation,
    a precision the device lacks)."""
    why: dict[tuple[str, str], list[str]] = {}
    for rank in ranks:
        for case in rank["cases"]:
            if isinstance(case, dict) and case.get("case") in CASES and isinstance(case.get("not_judged"), str):
                reason = harmless(case["not_judged"])[:200]
                why.setdefault((case["case"], reason), []).append(label(rank["rank"]))
    return [f"{name} on {places(where)} ({reason})" for (name, reason), where in why.items()]


def _peers(ranks: list[dict[str, Any]], label: Callable[[int], str], judged: Judged) -> None:
    """Within each kind, every case's digests: those that differ from a majority are blamed; where no digest has a
    majority, every rank that disagrees is named, none blamed."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for rank in ranks:
        groups.setdefault(json.dumps(rank["kind"], sort_keys=True), []).append(rank)
    if len(groups) > 1:
        kinds = "; ".join(f"{_kind_name(g[0])}: {places([label(r['rank']) for r in g])}" for g in groups.values())
        judged.notes.append(
            f"{len(groups)} kinds of device or software, each compared within its kind only (their bits may differ "
            f"by design): {kinds}"
        )
    for members in groups.values():
        if len(members) == 1:
            judged.notes.append(f"{label(members[0]['rank'])}: no peer of its kind to compare its bits with")
            continue
        for name in CASES:
            _case_across(name, members, label, judged)


def _kind_name(rank: dict[str, Any]) -> str:
    kind = rank["kind"]
    return harmless(" ".join(str(kind.get(k, "")) for k in ("device", "capability", "sms") if kind.get(k)))[:80]


def _case_across(name: str, members: list[dict[str, Any]], label: Callable[[int], str], judged: Judged) -> None:
    """One case's digests within one kind: a rank that differs from the majority is blamed; with no majority, the
    first differing element against the fp64 reference decides where it can (no_majority)."""
    ran = {r["rank"]: c for r in members for c in _cases(r) if c["case"] == name}
    counts = Counter(c["digest"] for c in ran.values())
    if len(counts) < 2:
        return
    best = max(counts.values())
    if best * 2 <= len(ran):
        _no_majority(name, ran, label, judged)
        return
    majority = next(d for d, n in counts.items() if n == best)
    agreeing = places([label(r) for r, c in sorted(ran.items()) if c["digest"] == majority])
    for rank, case in sorted(ran.items()):
        if case["digest"] != majority:
            where = _element(case.get("peer"), case, _whose(case.get("peer"), label))
            beyond = "; beyond its fp64 bound there" if _outside(case.get("peer"), "got") else ""
            digests = f"digest {case['digest']}, theirs {majority}"
            text = (
                f"{name} (repeat 0): not the bits of the majority of its peers ({agreeing}; {digests}), {where}{beyond}"
            )
            judged.findings.append(Finding(rank, name, text))


def _no_majority(name: str, ran: dict[int, dict[str, Any]], label: Callable[[int], str], judged: Judged) -> None:
    """No digest is held by most (two GPUs that differ): a rank whose value at the first differing element is beyond
    the fp64 bound is blamed (a rank that compared itself with it says so of it too); the ranks that still disagree
    after those are named, none blamed."""
    all_of = places([label(r) for r in sorted(ran)])
    digests = ", ".join(f"{label(r)}'s {c['digest']}" for r, c in sorted(ran.items())) if len(ran) <= 4 else ""
    head = f"{name} (repeat 0): {all_of} disagree with no majority" + (f" (digests {digests})" if digests else "")
    blamed: dict[int, str] = {}
    for rank, case in sorted(ran.items()):
        peer = case.get("peer")
        if _outside(peer, "got"):
            blamed[rank] = f"{head}; this one is beyond its fp64 bound, {_element(peer, case, _whose(peer, label))}"
        if _outside(peer, "expected") and peer["source"] in ran:
            swapped = {**peer, "got": peer["expected"], "expected": peer["got"]}
            where = _element(swapped, case, f"{label(rank)}'s ")
            blamed.setdefault(peer["source"], f"{head}; this one is beyond its fp64 bound, {where}")
    judged.findings += [Finding(rank, name, text) for rank, text in sorted(blamed.items())]
    left = {rank: case for rank, case in ran.items() if rank not in blamed}
    if len({case["digest"] for case in left.values()}) < 2:
        return
    for rank, case in sorted(left.items()):
        where = _element(case.get("peer"), case, _whose(case.get("peer"), label))
        text = f"{head}, and nothing tells which is right (within the fp64 bound, each); {where}"
        judged.findings.append(Finding(rank, name, text, sure=False))


def _whose(peer: Any, label: Callable[[int], str]) -> str:
    return f"{label(peer['source'])}'s " if isinstance(peer, dict) and isinstance(peer.get("source"), int) else ""


def _outside(peer: Any, which: str) -> bool:
    """The rank's (`got`) or its source's (`expected`) value at the first differing element was beyond the bound."""
    if not _located(peer) or not isinstance(peer.get("source"), int) or not isinstance(peer.get("within"), dict):
        return False
    return peer["within"].get(which) is False
