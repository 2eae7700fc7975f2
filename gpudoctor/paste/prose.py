"""Facts named in sentences: a GPU model, a torch build or a driver version written in the words around a paste
("on an RTX 3090 with torch 1.7.1+cu101, driver 470.82.01"), as a collect_env block or nvidia-smi would state them.

Each is recorded as read by this reader ("prose", with its line), and only where no output in the paste already
states the same fact: what a tool printed is a better witness than a sentence. Prose never says that the driver
answered (to_snapshot counts NVML as gathered only from a tool's output), and a torch release without its build tag
(`+cu118`, `+cpu`) is left out, since a judge would read a release without its CUDA as a CPU-only build.

A GPU named in prose is kept apart (`prose.gpus`: its name as NVIDIA prints it and its compute capability,
gpudoctor/data/gpus.toml): a sentence may name the machine the program works on as well as the one it fails on, so
it never becomes a GPU of the node; it gives the cures the architecture to choose a build for where the paste shows
no GPU of its own. A CUDA version in a sentence is not read: it may be the toolkit's, torch's or the driver's.

Every line is read once, word by word (a GPU name is looked up among a fixed set of word sequences): linear time."""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

import tomllib

from gpudoctor.paste.found import Found

READER = "prose"
GPU_SIGHTINGS = 20  # distinct GPU names kept
VENDOR = ("nvidia", "geforce", "tesla", "quadro")  # words a name may go with or without ("Tesla V100", "V100")
CONTEXT = ("gpu", "gpus", "card", "graphics")  # a word after a short name that makes it one ("a T4 GPU")
WORD = re.compile(r"[a-z]+|\d+")
JOINED = "-._/"
TORCH = re.compile(
    r"(?<![\w/.-])(?:py)?torch"
    r"(?:\s{0,3}==?\s{0,3}|[ \t:-]{1,5}(?:version[ \t]{0,3}(?:is[ \t]{1,3})?:?[ \t]{0,3})?|[ \t]{1,3}v)"
    r"(?P<release>\d{1,2}\.\d{1,2}(?:\.\d{1,2})?)\+(?P<tag>cu\d{2,3}|cpu)(?!\w|\.\d)",
    re.IGNORECASE | re.MULTILINE,
)
DRIVER = re.compile(
    r"\bdriver(?:[ \t]{1,3}version)?[ \t]{0,3}(?:is[ \t]{1,3}|[:=][ \t]{0,3}|[ \t])[rv]?"
    r"(?P<version>\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?!\w|\.\d)",
    re.IGNORECASE | re.MULTILINE,
)


@functools.cache
def gpu_names() -> dict[tuple[str, ...], tuple[str, tuple[int, int]]]:
    """Each GPU name of data/gpus.toml as the words a sentence may give it (vendor words dropped, letters split from
    digits: "GeForce RTX 3090" is ("rtx", "3090"), "NVIDIA A100" ("a", "100")), with its name and capability."""
    data = tomllib.loads(resources.files("gpudoctor.data").joinpath("gpus.toml").read_text(encoding="utf-8"))
    found: dict[tuple[str, ...], tuple[str, tuple[int, int]]] = {}
    for entry in data["capability"]:
        major, minor = (int(part) for part in entry["cc"].split("."))
        for name in entry["names"]:
            key = tuple(w for w in WORD.findall(name.lower()) if w not in VENDOR)
            found.setdefault(key, (name, (major, minor)))
    return found


def read(found: Found) -> None:
    _gpus(found)
    _torch(found)
    _driver(found)


def _gpus(found: Found) -> None:
    names, longest = gpu_names(), max(map(len, gpu_names()), default=0)
    seen: set[str] = set()
    for number, line in enumerate(found.lines):
        if len(seen) >= GPU_SIGHTINGS:
            return
        for name, capability in _named(*_words(line), names, longest):
            if name not in seen:
                seen.add(name)
                gpu = {"name": name, "compute_capability": list(capability), "line": number + 1}
                found.append("prose.gpus", gpu, READER, number)


def _words(line: str) -> tuple[list[str], set[int]]:
    """A line's words, lower case, letters split from digits, and where a name may start: not at a word joined to
    the one before it by a hyphen, dot, underscore or slash, so that no name starts inside a host or file name
    ("msm-h200-2")."""
    lowered = line.lower()
    found = list(WORD.finditer(lowered))
    starts = {i for i, m in enumerate(found) if not m.start() or lowered[m.start() - 1] not in JOINED}
    return [m.group() for m in found], starts


def _named(
    words: list[str], starts: set[int], names: dict[tuple[str, ...], tuple[str, tuple[int, int]]], longest: int
) -> list[tuple[str, tuple[int, int]]]:
    """The GPU names in one line's words: at each word a name may start at, the longest name that starts there
    ("rtx 6000 ada" before "rtx 6000"), a short one ("t4", "a2": a letter and one digit) only after a vendor word or
    before "GPU"."""
    named, at = [], 0
    while at < len(words):
        for size in range(min(longest, len(words) - at), 0, -1) if at in starts else ():
            hit = names.get(tuple(words[at : at + size]))
            if hit and _stands(words, at, size):
                named.append(hit)
                at += size - 1
                break
        at += 1
    return named


def _stands(words: list[str], at: int, size: int) -> bool:
    """A name is a name where it is more than a letter and a digit, or where a vendor word comes before it or a word
    like "GPU" after it (a run of digits is one word: "rtx 30901" holds no "rtx 3090")."""
    after = words[at + size] if at + size < len(words) else ""
    short = size == 2 and len(words[at]) == 1 and len(words[at + 1]) == 1
    return not short or (at > 0 and words[at - 1] in VENDOR) or after in CONTEXT


def _torch(found: Found) -> None:
    torch = found.facts["torch"]
    for number in found.matching(TORCH):
        if "version" in torch:
            return
        match = TORCH.search(found.lines[number])
        if match:
            tag = match.group("tag").lower()
            found.fact("torch.version", f"{match.group('release')}+{tag}", READER, number)
            found.fact("torch.cuda", _tag_cuda(tag), READER, number)


def _tag_cuda(tag: str) -> str | None:
    """A build tag's CUDA release: cu118 is 11.8, cu101 10.1, cu92 9.2, cu130 13.0; cpu none."""
    if tag == "cpu":
        return None
    digits = tag[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def _driver(found: Found) -> None:
    nvml: dict[str, Any] = found.facts["nvml"]
    for number in found.matching(DRIVER):
        if "driver_version" in nvml:
            return
        match = DRIVER.search(found.lines[number])
        if match:
            found.fact("nvml.driver_version", match.group("version"), READER, number)
