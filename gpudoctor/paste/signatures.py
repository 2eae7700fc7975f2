r"""Error signatures: a line a program prints when one known thing is wrong, the check whose cause it is, and
the fix. The table is data (gpudoctor/data/signatures/*.toml), one entry per message, each citing the source
that prints it; this module loads it and finds its lines in a paste.

An entry:

    [[signature]]
    id = "driver-too-old"                  # unique over all files
    owner = "torch.cuda-driver"            # the check the cause belongs to (a check id `gpudoctor list` shows)
    status = "fail"                        # or "warn"
    needle = "is too old (found version"   # a literal every matching line holds (a fast first pass)
    pattern = 'driver on your system is too old \(found version (?P<found>\d+)\)'  # a TOML literal: one backslash
    facts = { found = "nvml.cuda_driver_version:int" }  # optional: named group -> fact path[:int|float|str];
                                           # `_match` is the whole line
    cause = "The driver ... (what it means)"
    fix = ["sudo apt-get install ..."]     # optional commands; {group} takes the match's group, {script|train.py}
                                           # the script a traceback in the paste runs (else the default)
    source = "c10/cuda/CUDAFunctions.cpp device_count_impl(), cudaErrorInsufficientDriver"
    leads = true                           # optional: the line names why its owner failed (a Secure Boot refusal
                                           # under "driver not loaded"): where the owner's own facts failed too,
                                           # this cure leads and the owner's follows as the other way

An entry without needle and pattern (data/signatures/codes.toml) is a cause read from codes only: the code reader
(paste/codes.py) sights it; this module's reader never searches for it.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gpudoctor.command import Command, Unsafe, command
from gpudoctor.judging import oom
from gpudoctor.paste import container_start, is_available, macos, paths
from gpudoctor.paste.found import Found

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

READER = "error"
CONVERT = {"int": int, "float": float, "str": str}
WHOLE_LINE = "_match"  # a `facts` key that takes the whole line (the message), not a group
NEVER = r"(?!)"  # the pattern of an entry sighted by the code reader only


@dataclass(frozen=True)
class Signature:
    id: str
    owner: str
    status: str
    needle: str
    pattern: re.Pattern[str]
    facts: dict[str, str]
    cause: str
    fix: tuple[str, ...]
    source: str
    file: str
    summary: str = ""  # the verdict line, at most SUMMARY_CHARS
    fix_source: str = ""  # what says the fix cures it (the thread that resolved it, the vendor's document)
    fix_from: str = ""  # "owner": the owning check's own fix for what the paste shows (paste/cures.py)
    no_fix: str = ""  # why no command cures it (the cause is elsewhere, or only a person can act)
    leads: bool = False  # it names why its owner's failure holds: its cure leads the owner's own (paste/evidence.py)
    stands_for: str = ""  # the owner's own finding it stands for, which the owner's cure reads (paste/cures.py)
    fix_in: dict[str, tuple[str, ...]] = field(default_factory=dict)  # an application's own commands, by APPS name

    @property
    def headline(self) -> str:
        """The verdict line: the signature's `summary`, else its cause's first clause."""
        return self.summary or self.cause.split(". ")[0].split(": ")[0].rstrip(".")

    def fixes(self, values: dict[str, Any], apps: tuple[str, ...] = ()) -> tuple[list[Command], list[str]]:
        """The fix commands with their slots filled from the match's groups (and the paste's script), each value
        checked for its slot's kind and quoted (gpudoctor/command.py), the commands of the applications the paste
        shows (`fix_in`) first; a command whose value the paste does not give, or gives as no word, is left out,
        and the second list says why."""
        built, refused = [], []
        for template in (*(t for app in apps for t in self.fix_in.get(app, ())), *self.fix):
            try:
                made = command(template, **{k: v for k, v in values.items() if isinstance(v, str | int)})
            except Unsafe as exc:
                refused.append(str(exc))
                continue
            if made.open:
                refused.append(f"the paste does not show the {made.open[0]}")
            else:
                built.append(made)
        return built, refused


# The slots a fix may fill from the paste as a whole ({script|train.py}, {package}), not from its match.
WHOLE_PASTE = ("script", "package")


@functools.cache
def table() -> dict[str, Signature]:
    """Every signature, by id, from every file under data/signatures."""
    found: dict[str, Signature] = {}
    folder = resources.files("gpudoctor.data").joinpath("signatures")
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if item.name.endswith(".toml"):
            for entry in tomllib.loads(item.read_text(encoding="utf-8")).get("signature", []):
                signature = _signature(entry, item.name)
                if signature.id in found:
                    raise ValueError(f"signature {signature.id} is in {found[signature.id].file} and {item.name}")
                found[signature.id] = signature
    return found


def _signature(entry: dict[str, Any], file: str) -> Signature:
    return Signature(
        id=entry["id"],
        owner=entry["owner"],
        status=entry["status"],
        needle=entry.get("needle", ""),
        pattern=re.compile(entry.get("pattern", NEVER)),
        facts=dict(entry.get("facts", {})),
        cause=entry["cause"],
        fix=tuple(entry.get("fix", ())),
        source=entry["source"],
        file=file,
        summary=entry.get("summary", ""),
        fix_source=entry.get("fix_source", ""),
        fix_from=entry.get("fix_from", ""),
        no_fix=entry.get("no_fix", ""),
        leads=bool(entry.get("leads", False)),
        stands_for=entry.get("stands_for", ""),
        fix_in={app: tuple(fixes) for app, fixes in entry.get("fix_in", {}).items()},
    )


@functools.cache
def _needles() -> tuple[str, ...]:
    return tuple(sorted({s.needle for s in table().values() if s.needle}))


# A traceback's first frame of a script run as the main module, outside the installed packages (a package's
# __init__.py runs "in <module>" too, as it is imported): the program its fixes run again.
SCRIPT = re.compile(r'File "([^"\n]{1,300}\.py)", line \d{1,9}, in <module>')
# A frame in an installed package (pip's site-packages, Debian's dist-packages; CPython's and IPython's traceback
# formats both print the path), and a pip install line: the package whose import a pasted error broke is the
# innermost frame's package unless it is torch's, else the first package the paste's pip install line names.
PACKAGE_FRAME = re.compile(r"(?:site|dist)-packages[/\\]([A-Za-z0-9][A-Za-z0-9_.-]{0,99})[/\\]")
PIP_INSTALL = re.compile(r"(?:^|[\s!])pip3? install ([^\n]{1,1000})")
PROJECT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,98}[A-Za-z0-9])?")  # a project name (PEP 508), no version
# pip install's options that take the next word as their value (pip install --help): that word is no package.
PIP_VALUED = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t", "--target", "-i", "--index-url"}
PIP_VALUED |= {"--extra-index-url", "-f", "--find-links", "--prefix", "--root", "--platform", "--python-version"}
FILE_SUFFIXES = (".txt", ".whl", ".gz", ".zip", ".toml", ".cfg", ".py")
NOT_THE_PACKAGE = ("torch",)
# The folder of a Python an application bundles, as its paths show it (spelled so by the application), by the name
# judging/compat.py BUNDLED_PIP gives its pip: ComfyUI's Windows portable (.ci/windows_nvidia_base_files/
# run_nvidia_gpu.bat runs .\python_embeded\python.exe).
BUNDLED_PYTHON = {"comfyui-portable": "python_embeded"}
# The applications a paste shows by their own paths and module names (a traceback's frames, a launcher's line): their
# own settings lead a cure where a signature names them (`fix_in`). ComfyUI: its comfy package and its portable's
# python_embeded; vLLM: its package folder and its entry points.
APPS = {
    "comfyui": (
        "comfy/model_management",
        "comfy\\model_management",
        "ComfyUI/main.py",
        "ComfyUI\\main.py",
        "python_embeded",
    ),
    "vllm": ("site-packages/vllm/", "dist-packages/vllm/", "site-packages\\vllm\\", "vllm.entrypoints", "vllm serve"),
    # TensorFlow: its package folder and the source paths its C++ logs name (tensorflow/core/..., XLA's and TSL's
    # external/local_* trees, the CUDA library loader dso_loader.cc).
    "tensorflow": (
        "site-packages/tensorflow/",
        "dist-packages/tensorflow/",
        "site-packages\\tensorflow\\",
        "tensorflow/core/",
        "tensorflow/stream_executor/",
        "tensorflow/compiler/",
        "external/local_xla/",
        "external/local_tsl/",
        "dso_loader.cc",
    ),
}
# The innermost frame's source line, which CPython's traceback prints right above the exception line (traceback
# module, https://docs.python.org/3/library/traceback.html, StackSummary.format): an import statement there names the
# module whose load failed, the top-level package its first word.
IMPORT_STATEMENT = re.compile(
    r"\A\s*(?:from\s+([A-Za-z_]\w{0,99})(?:\.\w{1,100}){0,20}\s+import\s|import\s+([A-Za-z_]\w{0,99}))"
)
RAISED = ("ImportError:", "OSError:", "ModuleNotFoundError:")


def read(found: Found) -> None:
    """Every line that holds a signature's needle, searched with its pattern: a signature for each match, and
    the facts its groups carry; the script a traceback shows (`{script|train.py}` in a fix)."""
    for number in found.holding(_needles()):
        _match_line(found, number, found.lines[number])
    found.script = next(
        (
            m.group(1)
            for n in found.holding(("in <module>",))
            if (m := SCRIPT.search(found.lines[n])) and not PACKAGE_FRAME.search(m.group(1))
        ),
        None,
    )
    found.package = _package(found)
    found.python = next((name for name, folder in BUNDLED_PYTHON.items() if found.holding((folder,))), None)
    found.apps = tuple(app for app, marks in APPS.items() if found.holding(marks))
    found.shown_os = paths.system(found)
    _tensorflow_start(found)
    is_available.sight(found, READER)
    container_start.sight(found, READER)
    macos.recast(found)


def _package(found: Found) -> str | None:
    """The package whose import the paste's error broke: the innermost traceback frame's installed package, where
    it is not torch (then the load that failed is torch's own), else the package a `pip install` line names first
    where the paste shows no such frame; None where it shows neither."""
    framed = [m.group(1) for n in found.holding(("-packages",)) for m in PACKAGE_FRAME.finditer(found.lines[n])]
    if framed:
        return None if framed[-1] in NOT_THE_PACKAGE else framed[-1]
    stated = _imported(found)
    if stated:
        return None if stated in NOT_THE_PACKAGE else stated
    lines = found.holding(("pip install", "pip3 install"))
    named = (_installed(m.group(1)) for n in lines if (m := PIP_INSTALL.search(found.lines[n])))
    return next((name for name in named if name and name not in NOT_THE_PACKAGE), None)


def _imported(found: Found) -> str | None:
    """The top-level module of the last import statement printed right above an ImportError or OSError line (a
    traceback cut to its innermost frame's source line); None where the paste shows none."""
    named = None
    for n in found.holding(RAISED):
        raised = found.lines[n].lstrip()
        if n and raised.startswith(RAISED) and (m := IMPORT_STATEMENT.match(found.lines[n - 1])):
            named = m.group(1) or m.group(2)
    return named


def _installed(arguments: str) -> str | None:
    """The first package a pip install command line names: options and their values skipped, a file, a path or a
    URL (a requirements file, a wheel, `.`) no package."""
    words = arguments.split()
    skip = False
    for word in words:
        if skip or word.startswith("-"):
            skip = not skip and word in PIP_VALUED
            continue
        return word if PROJECT.fullmatch(word) and not word.endswith(FILE_SUFFIXES) else None
    return None


def _match_line(found: Found, number: int, line: str) -> None:
    for signature in table().values():
        if not signature.needle or signature.needle not in line:
            continue
        match = signature.pattern.search(line)
        if not match:
            continue
        values = {k: v for k, v in match.groupdict().items() if v is not None}
        found.signature(signature.id, READER, number, values)
        whose = whose_memory(found, number) if signature.id == OUT_OF_MEMORY else None
        if whose:
            found.signature(whose, READER, number, values)
        carried = {**values, WHOLE_LINE: line.strip()}
        for group, target in signature.facts.items():
            if group in carried:
                path, _, kind = target.partition(":")
                found.fact(path, CONVERT[kind or "str"](carried[group]), READER, number)


# torch's out-of-memory message read by its own figures (judging/oom.py): whose memory filled the GPU.
OUT_OF_MEMORY = "cuda-out-of-memory"
HELD_ELSEWHERE = 0.5  # the share of the GPU's memory neither free nor this process's above which others hold it
# torch's figures before 2.1 count only its allocator's memory, not the process's CUDA context and libraries'
# handles (cuBLAS, cuDNN): hundreds of MiB that are the process's own, allowed for before blaming others. Measured:
# on the H100 capture (tests/fixtures/real/h100-2026-11-26/busy/nvml-other-process-holding-memory-idle.json, driver
# 580.159.04, CUDA 13.0) a torch process holding 60 GiB of tensors reads usedGpuMemory 65238204416 B in NVML, 776 MiB
# beyond them; the fixtures' single-process out-of-memory messages (tests/test_signatures_whose.py) leave 0.5-1.6 GiB
# of a GPU outside torch's count (a display, libraries' workspaces). 1 GiB: the measured context, rounded up to a
# cuBLAS and cuDNN workspace, which keeps a 1 GiB GPU's own program from being read as another's hold.
OUTSIDE_ALLOCATOR = 2**30
FRAGMENTED = 0.05  # reserved-but-unallocated memory, as a share of the GPU, that is large (and above the request)
RESERVED = re.compile(rf"{oom.SIZE} reserved in total by PyTorch")  # 1.4 to 2.0: this process's cache
ALLOCATED = re.compile(rf"{oom.SIZE} already allocated")  # before 2.1
CACHED = re.compile(rf"; {oom.SIZE} cached\)")  # 1.0 to 1.3: cached beyond the allocated
UNALLOCATED = re.compile(rf"{oom.SIZE} is reserved by PyTorch but unallocated")  # 2.1+
# 2.1+: this process's allocator, where the message names no "this process" (NVML lists every process on the GPU by
# its PID, and inside a container that PID is the host's, so torch cannot tell its own from the others').
BY_PYTORCH = re.compile(rf"Of the allocated memory {oom.SIZE} is allocated by PyTorch, and {oom.SIZE} is reserved")
# The allocator asks CUDA for more than the request: "requests between 1MB and 10MB will allocate and split a 20MB
# block" (c10/cuda/CUDACachingAllocator.cpp, kLargeBuffer), so a little free memory beside a small request is no room.
LARGE_BUFFER = 20 * 2**20
MESSAGE_LINES = 8  # a pasted message wrapped over lines: torch's is a few hundred characters


# TensorFlow 1.x's device line when its session starts (tensorflow/core/common_runtime/gpu/gpu_device.cc: "totalMemory:
# " << HumanReadableNumBytes(total_bytes) << " freeMemory: " << HumanReadableNumBytes(free_bytes), "%.2f" and a binary
# unit, or "%lldB"): memory not free before this program allocated anything is other processes'.
TF_BYTES = r"(\d{1,20}(?:\.\d{1,2})?)((?:[KMGTPE]i)?B)"  # HumanReadableNumBytes: "11.17GiB", "304.31MiB", "512B"
TF_START = re.compile(rf"totalMemory: {TF_BYTES} freeMemory: {TF_BYTES}")
TF_HELD_AT_START = "tensorflow-gpu-held-at-start"


def _tensorflow_start(found: Found) -> None:
    """TensorFlow's device line where more than HELD_ELSEWHERE of the GPU was not free when its session started:
    another process held it (data/signatures/memory.toml)."""
    for number in found.holding(("freeMemory: ",)):
        match = TF_START.search(found.lines[number])
        if match is None:
            continue
        total, free = oom.size(*match.group(1, 2)), oom.size(*match.group(3, 4))
        if total - free > HELD_ELSEWHERE * total:
            values = {"total": match.group(1) + match.group(2), "free": match.group(3) + match.group(4)}
            found.signature(TF_HELD_AT_START, READER, number, values)


def whose_memory(found: Found, number: int) -> str | None:
    """What an out-of-memory line's own figures say (data/signatures/memory.toml): another process's hold where
    the GPU is full and this process holds little of it, fragmentation where the cache's unallocated part exceeds
    the request, the program's size where this process holds the rest; None where the figures do not say, show
    the request fitting in the free memory, or the request alone exceeding the GPU (checks/program.py judges
    that)."""
    text = "\n".join(found.lines[number : number + MESSAGE_LINES])
    read = oom.parse(text)
    if read is None or None in (read.total, read.free, read.requested) or read.larger_than_gpu:
        return None
    if read.free >= read.requested + LARGE_BUFFER:  # room for the request: the figures do not explain the failure
        return None
    mine = _this_process(read, text)
    if mine is None:
        return None
    if read.total - read.free - mine > HELD_ELSEWHERE * read.total:
        return "cuda-out-of-memory-held-elsewhere"
    spare = UNALLOCATED.search(text)
    unallocated = oom.size(*spare.groups()) if spare else 0
    if unallocated > max(read.requested or 0, FRAGMENTED * read.total):
        return "cuda-out-of-memory-fragmented"
    return "cuda-out-of-memory-program-size"


def _this_process(read: oom.OutOfMemory, text: str) -> int | None:
    """The memory torch says this process holds: all of it (2.1+), else its allocator's and an allowance for
    what the allocator does not count; None where the message does not say."""
    if read.this_process is not None:
        return read.this_process
    by_pytorch = BY_PYTORCH.search(text)
    if by_pytorch:
        allocated, unallocated = by_pytorch.groups()[:2], by_pytorch.groups()[2:]
        return oom.size(*allocated) + oom.size(*unallocated) + OUTSIDE_ALLOCATOR
    reserved = RESERVED.search(text)
    if reserved:
        return oom.size(*reserved.groups()) + OUTSIDE_ALLOCATOR
    allocated, cached = ALLOCATED.search(text), CACHED.search(text)
    if allocated and cached:
        return oom.size(*allocated.groups()) + oom.size(*cached.groups()) + OUTSIDE_ALLOCATOR
    return None
