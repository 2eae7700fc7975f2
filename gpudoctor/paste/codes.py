r"""Codes, not messages: the error codes of the CUDA runtime and driver, NVML, NCCL, cuDNN and cuBLAS, found however
an application wraps them. The tables are data (gpudoctor/data/codes/*.toml), one entry per code, each table citing
the headers and libraries it was read from; `families.toml` maps each code's cause family to the error signature
whose owner check, cause and cure it shares. A code found is recorded as a sighting of that signature, so it feeds
the same evidence and diagnosis as a message would (paste/evidence.py).

A line is read when it names a GPU library (CUDA, cudart, a cu* driver call, NVML, NCCL, cuDNN, cuBLAS) or a GPU,
and shows a code in one of three ways, the first that the line holds deciding:
- its name: `cudaErrorNoDevice`, `CUDA_ERROR_NO_DEVICE`, `NVML_ERROR_DRIVER_NOT_LOADED`, pynvml's
  `NVMLError_DriverNotLoaded`, `ncclSystemError`, `CUDNN_STATUS_NOT_INITIALIZED`, `CUBLAS_STATUS_EXECUTION_FAILED`;
- the library's own text ("no CUDA-capable device is detected"); a short, common text ("unknown error", "Timeout")
  only where it follows a separator (`: `, `'`, `(`, `=`, `,`, `->`) as wrappers print it;
- a number after "error", "failure", "code", "status", "result" or "returned" (`code=100(`, `error=35`, `Cuda
  failure 2`, `returned 802`, `UNKNOWN ERROR (34)`), in the table of the library named last before it.
A line shows one code: where it holds several (a wrapper's code around the library's), the last, innermost one.
An old number beside a text (`cuda runtime error (38) : no CUDA-capable device is detected`, numbered before CUDA
10.1) is read by its text.

A line that already gave a signature to another reader is left to it, and so is a signature another reader already
found elsewhere in the paste: the code adds nothing to either. Every pattern is bounded; the reader visits only the
lines that hold a library's name (Found.holding).
"""

from __future__ import annotations

import bisect
import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpudoctor.paste.found import Found

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

READER = "error code"
TABLES = ("cuda_runtime", "cuda_driver", "nvml", "nccl", "cudnn", "cublas")  # files under data/codes, in this order
BY = ("machine", "program", "either", "none")  # who causes a code: the node, the program, either, or nobody

# The lines worth a look: they name a GPU library or a GPU (the driver API's calls by their common prefixes).
CONTEXT = (
    "CUDA", "cuda", "Cuda", "NVML", "nvml", "Nvml", "NCCL", "nccl", "Nccl", "GPU", "gpu", "Gpu",
    "cuDNN", "CUDNN", "cudnn", "cuBLAS", "CUBLAS", "cublas", "CUresult",
    "cuInit", "cuDevice", "cuCtx", "cuMem", "cuModule", "cuLaunch", "cuStream", "cuGet", "cuLink",
)  # fmt: skip
# Warnings in which the library's caller names a code and goes on another way, so the code is no failure: torch's
# cuDNN v8 convolution tries the next execution plan after TORCH_WARN("Plan failed with a cudnnException: ", ...)
# (aten/src/ATen/native/cudnn/Conv_v8.cpp; the string is in libtorch_cuda.so).
FELL_BACK = ("Plan failed with a cudnnException",)
# A library named in a line, by the table its bare numbers belong to. cuDNN and cuBLAS before the driver's cu* calls
# (cuDNN is "cu" and a capital too), the driver before the runtime (CUDA_ERROR, "CUDA driver" start with CUDA). Not
# inside a word (libnccl-net.so is a file), but torch's old THCudaCheck is the runtime's.
LIBRARY = re.compile(
    r"(?<![A-Za-z])(?:(?P<cudnn>cu[dD][nN][nN])|(?P<cublas>cu[bB][lL][aA][sS]|CUBLAS)|(?P<nvml>nvml|NVML|Nvml)"
    r"|(?P<nccl>nccl|NCCL|Nccl)|(?P<driver>CUresult|CUDA_ERROR|CUDA driver|nvcuda|cu[A-Z][a-z]{2,30})"
    r"|(?P<runtime>cuda|CUDA|Cuda|THCudaCheck))"
)
LIBRARY_TABLE = {
    "cudnn": "cudnn",
    "cublas": "cublas",
    "nvml": "nvml",
    "nccl": "nccl",
    "driver": "cuda-driver",
    "runtime": "cuda-runtime",
}
# Every way a table names its codes (the names themselves are looked up in the tables).
NAME = re.compile(
    r"\b(?:cuda(?:Success|Error[A-Z][A-Za-z]{0,60})|CUDA_(?:SUCCESS|ERROR_[A-Z_]{1,60})"
    r"|NVML_(?:SUCCESS|ERROR_[A-Z_]{1,60})|NVMLError_[A-Za-z]{1,60}|nccl[A-Z][A-Za-z]{1,40}"
    r"|CUDNN_STATUS_[A-Z0-9_]{1,80}|CUBLAS_STATUS_[A-Z_]{1,60})\b"
)
# A number after a word that introduces a code; never after "exit" (a process's exit code or status). A word glued to
# the number ("999at main.cu", as pasted) leaves it the code; a fraction, a hexadecimal figure ("10de") does not.
# "err" is Ollama's word ("cuInit err: 999"), and "nvcuda" (the Windows driver library, nvcuda.dll) its name for the
# driver API ("nvcuda init failure: 999", ollama's gpu_info_nvcuda.c).
NUMBER = re.compile(
    r"(?<![\w-])(?<!exit )(error|err|failure|code|status|result|returned)[ \t]{0,3}[:=#(]?[ \t]{0,3}(\d{1,6})"
    r"(?![\d_]|\.\d|[xX][0-9a-fA-F]|[0-9a-fA-F]{1,16}\b)",
    re.IGNORECASE,
)
# Where a program waits for its kernels (CUDA C++ Programming Guide, Error Checking: a kernel's error is reported by
# a later call, cudaDeviceSynchronize() the usual one): a code read on such a line is the kernel's end, not CUDA's
# start, and a family may name another signature for it (families.toml `at_synchronize`).
SYNCHRONIZE = re.compile(r"\bcu(?:da)?(?:Device|Stream|Ctx|Event)Synchronize\b")
# The words that introduce a table's code where not all of them do: NCCL's log says "returned 2" of dlopen's errno and
# "with error 5" of a verbs completion status, so an NCCL number counts only as torch and NCCL print its result
# ("NCCL error 2", "NCCL Error 2: unhandled system error", ncclResult).
INTRODUCED = {"nccl": ("error", "result")}
# TensorFlow and JAX print a driver code they have no name for as "UNKNOWN ERROR (34)" (tensorflow stream_executor
# cuda_driver.cc ToString): the number is the code, the words are the wrapper's.
PLACEHOLDER = re.compile(r"unknown error[ \t]{0,2}\((\d{1,6})\)", re.IGNORECASE)
SEPARATOR = re.compile(r"(?:[:'\"(\[=,]|->)[ \t]{0,3}$")  # what precedes a short text where a wrapper prints it
WINDOW = 24  # characters from a library's name to the word before a number that is its code
SHORT_TEXT = 4  # words: a text of fewer is common English ("unknown error") and needs a separator before it
BEFORE = 8  # characters before a text in which its separator is looked for


@dataclass(frozen=True)
class Code:
    """One code of one table."""

    table: str  # the table's id: "cuda-runtime", "cuda-driver", "nvml", "nccl", "cudnn", "cublas"
    number: int
    name: str
    text: str  # the library's own text for it ("" where no source gives one)
    family: str  # its cause family (families.toml)
    by: str  # "machine", "program", "either" or "none"
    signature: str  # the signature a sighting is recorded as ("" for a code that is no fault)
    aliases: tuple[str, ...] = ()  # other names printed for it (pynvml's classes, cuDNN 8's names)
    wordings: tuple[str, ...] = ()  # older or shorter texts of the same code
    headers: tuple[str, ...] = ()  # the releases read whose header declares it, where not all of them do


@dataclass(frozen=True)
class Table:
    """One library's codes and where they were read."""

    id: str
    library: str
    enum: str
    newest: str  # the newest release read
    read: tuple[str, ...]  # every release read
    source: str
    file: str
    codes: tuple[Code, ...]


def _load(name: str) -> dict[str, Any]:
    folder = resources.files("gpudoctor.data").joinpath("codes")
    return tomllib.loads(folder.joinpath(f"{name}.toml").read_text(encoding="utf-8"))


@functools.cache
def families() -> dict[str, dict[str, str]]:
    """Each cause family by id: the signature it is sighted as ("" for none), what it means, and the signature of a
    sighting at a synchronize call ("" for the same)."""
    keys = ("signature", "at_synchronize")
    return {f["id"]: {"means": f["means"], **{k: f.get(k, "") for k in keys}} for f in _load("families")["family"]}


@functools.cache
def tables() -> dict[str, Table]:
    """Every table of codes, by id, in TABLES' order."""
    found: dict[str, Table] = {}
    for name in TABLES:
        data = _load(name)
        meta = data["table"]
        codes = tuple(_code(meta["id"], entry) for entry in data["code"])
        found[meta["id"]] = Table(
            meta["id"], meta["library"], meta["enum"], meta["newest"], tuple(meta["read"]), meta["source"], name, codes
        )
    return found


def _code(table: str, entry: dict[str, Any]) -> Code:
    family = entry["family"]
    return Code(
        table=table,
        number=entry["number"],
        name=entry["name"],
        text=entry.get("text", ""),
        family=family,
        by=entry["by"],
        signature=entry.get("signature") or families()[family]["signature"],
        aliases=tuple(entry.get("aliases", ())),
        wordings=tuple(entry.get("wordings", ())),
        headers=tuple(entry.get("headers", ())),
    )


def every_code() -> list[Code]:
    return [code for table in tables().values() for code in table.codes]


@functools.cache
def _by_name() -> dict[str, Code]:
    return {name: code for code in every_code() for name in (code.name, *code.aliases)}


@functools.cache
def _by_number() -> dict[tuple[str, int], Code]:
    return {(code.table, code.number): code for code in every_code()}


@functools.cache
def _by_text() -> dict[str, tuple[Code, ...]]:
    """Each text (lowercased) and the codes that print it, in TABLES' order."""
    found: dict[str, list[Code]] = {}
    for code in every_code():
        for text in {t.lower() for t in (code.text, *code.wordings) if t}:
            found.setdefault(text, []).append(code)
    return {text: tuple(codes) for text, codes in found.items()}


def _text_pattern() -> re.Pattern[str]:
    """Every text of every table as one pattern, built as a trie (each position tries one branch per next
    character, the longest text first), so its work per line does not grow with the number of texts."""
    return re.compile(rf"(?<![\w-])(?:{_trie(sorted(_by_text()))})(?![\w-])", re.IGNORECASE)


def _trie(words: list[str]) -> str:
    """An alternation of `words` as nested groups on their shared prefixes."""
    nodes: dict[str, list[str]] = {}
    ends = False
    for word in words:
        if word:
            nodes.setdefault(word[0], []).append(word[1:])
        else:
            ends = True
    branches = [re.escape(first) + _trie(rest) for first, rest in sorted(nodes.items())]
    if not branches:
        return ""
    inner = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    return f"(?:{inner})?" if ends else inner


TEXT = _text_pattern()


def read(found: Found) -> None:
    """Each line that names a GPU library and shows a code: a sighting of the code's signature, with the code."""
    known = {sighting["id"] for sighting in found.signatures}
    taken = {found.lines[sighting["line"] - 1].strip() for sighting in found.signatures}  # a repeat is taken too
    fell_back = set(found.holding(FELL_BACK))
    for number in found.holding(CONTEXT):
        if found.lines[number].strip() in taken or number in fell_back:
            continue
        code = shown(found.lines[number])
        signature = code and _at_synchronize(code, found.lines[number])
        if code is None or not signature or signature in known:
            continue
        found.signature(signature, READER, number, {"code": code.name, "number": str(code.number)})


def _at_synchronize(code: Code, line: str) -> str:
    """The code's signature, or its family's for a kernel's end where the line names a synchronize call."""
    other = families()[code.family]["at_synchronize"]
    return other if other and SYNCHRONIZE.search(line) else code.signature


class Libraries:
    """The libraries a line names, in order: where each name starts and ends, and the table its codes are in. Read
    once a line needs them (a line that names its code needs none)."""

    def __init__(self, line: str) -> None:
        named = [(m.start(), m.end(), LIBRARY_TABLE[str(m.lastgroup)]) for m in LIBRARY.finditer(line)]
        self.starts = [start for start, _, _ in named]
        self.ends = [end for _, end, _ in named]
        self.named = [table for _, _, table in named]
        self.tables = set(self.named)

    def last_before(self, at: int) -> tuple[int, str] | None:
        """Where the library named last before `at` ends, and its table."""
        index = bisect.bisect_left(self.starts, at)
        return (self.ends[index - 1], self.named[index - 1]) if index else None


def shown(line: str) -> Code | None:
    """The code `line` shows: by name, else by the library's text, else by number; the last of the kind found."""
    named = _by_its_name(line)
    if named:
        return named[-1]
    libraries = Libraries(line)
    for finder in (_by_its_text, _by_its_number):
        codes = finder(line, libraries)
        if codes:
            return codes[-1]
    return None


def _by_its_name(line: str) -> list[Code]:
    return [code for m in NAME.finditer(line) if (code := _by_name().get(m.group()))]


def _by_its_text(line: str, libraries: Libraries) -> list[Code]:
    """Each text of a table in `line`, as the code of the library named last before it, else of any library the line
    names, else of the first table that prints it. A short text counts only after a separator and beside the name of
    a library that prints it."""
    found = []
    tables = libraries.tables
    for match in TEXT.finditer(line):
        codes = _by_text()[match.group().lower()]
        if len(match.group().split()) < SHORT_TEXT:
            if not SEPARATOR.search(line[max(0, match.start() - BEFORE) : match.start()]):
                continue
            codes = tuple(c for c in codes if c.table in tables)
            if not codes:
                continue
        last = libraries.last_before(match.start())
        mine = [c for c in codes if last and c.table == last[1]] or [c for c in codes if c.table in tables]
        code = (mine or list(codes))[0]
        placeholder = PLACEHOLDER.match(line, match.start())
        found.append(_by_number().get((code.table, int(placeholder.group(1))), code) if placeholder else code)
    return found


def _by_its_number(line: str, libraries: Libraries) -> list[Code]:
    """Each number after a word that introduces a code, in the table of the library named just before it (within
    WINDOW characters: a number further on belongs to something else the line says)."""
    found = []
    for match in NUMBER.finditer(line):
        last = libraries.last_before(match.start())
        if last is None or match.start() - last[0] > WINDOW:
            continue
        table = last[1]
        if match.group(1).lower() not in INTRODUCED.get(table, (match.group(1).lower(),)):
            continue
        number = int(match.group(2))
        code = _by_number().get((table, number))
        if code is None and table == "cuda-driver":  # "CUDA driver" and cu* calls print runtime numbers too
            code = _by_number().get(("cuda-runtime", number))
        if code is not None:
            found.append(code)
    return found
