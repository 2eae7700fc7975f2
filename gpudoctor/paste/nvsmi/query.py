"""`nvidia-smi -q`: the driver, CUDA and GPU count lines, then one indented "Key : Value" section per GPU, read as
a tree and turned into GPU facts by query_xml.py (as `-q -x` would print it) once the whole paste is read.

`-q` sections are numbered in the order printed (what nvsmi_xml does), unless a table or `-L` in the same paste
gives the index of that bus id or UUID (`nvidia-smi -q -i 3` prints GPU 3 alone)."""

from __future__ import annotations

import re

from gpudoctor.facts import nvsmi_xml
from gpudoctor.paste.nvsmi.query_xml import query_facts
from gpudoctor.paste.nvsmi.state import BUS_ID, MAX_LINE, Node, Paste, QueryGpu, bus_id, clean

MAX_TREE_LINES = 20000  # lines of one `-q` GPU section (a real one has about 300)
MAX_DEPTH = 12  # nesting of a `-q` section (a real one goes 6 deep)

# "    Key                : Value" (a space before the colon), section titles, the per-GPU header.
Q_BANNER = "NVSMI LOG"
Q_PAIR = re.compile(r"^([^:]*?\S)\s+:(?:\s(.*))?$")
Q_GPU = re.compile(rf"^GPU ({BUS_ID})$")
Q_SECTION = re.compile(r"^[A-Za-z][^:]*$")


def starts(paste: Paste, i: int, line: str) -> bool:
    """Whether line `i` starts a `-q` output: its banner, or a GPU section header without it."""
    return Q_BANNER in line or (Q_GPU.match(line.strip()) is not None and q_follows(paste, i))


def q_follows(paste: Paste, i: int) -> bool:
    """Whether the line after a "GPU 00000000:3B:00.0" line is an indented `-q` "Key : Value" line."""
    following = clean(paste.lines[i + 1]) if i + 1 < len(paste.lines) else ""
    return following[:1] in (" ", "\t") and Q_PAIR.match(following.strip()) is not None


def read(paste: Paste, i: int) -> int:
    """A `-q` output: the driver, CUDA and GPU count lines, then one indented section per GPU."""
    lines = paste.lines
    base = indent(clean(lines[i]))
    position = 0
    if Q_BANNER in lines[i]:
        i += 1
    while i < len(lines):
        line = clean(lines[i]).expandtabs(4)
        if not line.strip():
            i += 1
            continue
        if indent(line) != base or len(line) > MAX_LINE:
            break
        header = Q_GPU.match(line.strip())
        if header:
            i = query_gpu(paste, i, base, bus_id(header.group(1)), position)
            position += 1
            continue
        pair = Q_PAIR.match(line.strip())
        if pair is None:
            break
        query_global(paste, i, pair.group(1), pair.group(2) or "")
        i += 1
    return i


def query_global(paste: Paste, i: int, key: str, text: str) -> None:
    word = text.split()[0] if text.split() else ""
    if key in ("Driver Version", "KMD Version") and nvsmi_xml.value(word):
        paste.fact("nvml.status", "ok", i)
        paste.fact("nvml.driver_version", word, i)
    elif key in ("CUDA Version", "CUDA UMD Version") and nvsmi_xml.value(word):
        paste.fact("nvml.cuda_driver_version", nvsmi_xml.cuda_driver_version(word), i)
    elif key == "Attached GPUs" and word.isascii() and word.isdigit():
        paste.fact("nvml.attached_gpus", int(word), i)


def query_gpu(paste: Paste, i: int, base: int, bus: str, position: int) -> int:
    """One GPU section: its lines as a tree, placed once the paste has been read."""
    lines = paste.lines
    root = Node("gpu", bus, i)
    stack: list[tuple[int, Node]] = [(base, root)]
    start, i = i, i + 1
    while i < len(lines) and i - start < MAX_TREE_LINES:
        line = clean(lines[i]).expandtabs(4)
        depth = indent(line)
        if not line.strip():
            i += 1
            continue
        if depth <= base or len(line) > MAX_LINE:
            break
        node = q_node(line.strip(), i)
        if node is None:
            break
        while stack[-1][0] >= depth:
            stack.pop()
        if len(stack) > MAX_DEPTH:
            break
        stack[-1][1].children.append(node)
        stack.append((depth, node))
        i += 1
    paste.queries.append(QueryGpu(bus, position, start, root))
    paste.fact("nvml.status", "ok", start)
    return i


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def normal(key: str) -> str:
    """A `-q` key as a name: "GPU T.Limit Temp" -> "gpu_t_limit_temp", "SRAM Uncorrectable SEC-DED" ->
    "sram_uncorrectable_sec_ded"."""
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def q_node(text: str, i: int) -> Node | None:
    """A `-q` line inside a GPU section; None for a line that is not one (the section has ended)."""
    pair = Q_PAIR.match(text)
    if pair:
        return Node(normal(pair.group(1)), (pair.group(2) or "").strip(), i)
    if Q_SECTION.match(text):
        return Node(normal(text), None, i)
    return None


def finish(paste: Paste) -> None:
    """Each section at the index a table or `-L` gives its bus id or UUID, else at its place in the output."""
    for query in paste.queries:
        uuid = next((n.value for n in query.tree.children if n.key == "gpu_uuid"), None)
        index = paste.index_of_bus.get(query.bus, paste.index_of_uuid.get(uuid or "", query.position))
        paste.gpu(index, query_facts(query), query.line)
