"""`dcgmi diag` output, its box of text or `-j` JSON, as users paste it: which tests ran, what each gave (per
GPU where shown), the warnings and information they printed, and the figures those state (a PCIe bandwidth,
a memory bandwidth, GFLOPS), so a judge can tell a failing or slow GPU from a healthy one.

What it records:
- `benchmarks.dcgm_diag`: one dict for the paste, {"line", "format" ("text" or "json"), "version" (DCGM's),
  "driver_version", "gpus": [{"index", "name", "bus_id"}] (the GPUs its results name; the diagnostic prints
  neither names nor bus ids), "tests": [{"name", "category", "result", "gpus": {index: result},
  "messages", "figures": [{"gpu", "name", "value", "unit"}]}]}; results are lower-case ("pass", "fail",
  "warn", "skip", "not run"); a test's own result where shown, else the worst of its GPUs' (fail, warn, pass,
  skip, not run). A message whose test row was cut from the paste keeps "name" None.
- `nvml.driver_version` from "Driver Version Detected" (DCGM asks NVML).

Text, from NVIDIA/DCGM dcgmi/Diag.cpp (72fa3fea, 4.6, and 903d745c, 3.3.8) and CommandOutputController.cpp:
the box DIAG_HEADER "| Diagnostic | Result |", rows of the stencil "| <DATA_NAME 25> | <DATA_INFO 46> |"
(a longer value is cut to "..."), the category bars "|-----  Metadata  ---", "|-----  Deployment  ---",
"+-----  Hardware  ---", "+-----  Integration  ---", "+-----  Stress  ---"; metadata rows "DCGM Version",
"Driver Version Detected", "GPU Device IDs Detected". DCGM 4.x: a test row "memory | Pass" (HelperDisplayDiagResult:
Pass, Skip, Warn, Fail, Not Run), then its global "Warning" rows, then per entity "GPU0: Pass" with its
"Warning: GPU0" / "Info: GPU0" rows. DCGM 3.x and before: "GPU Memory | Pass - All" (or Skip/Fail/Warn - All),
else "Pass - GPUs: 1, 2   " and "Fail - GPU: 0" rows, then "Warning", "Info" or (Deployment) "Error" rows.
DisplayVerboseInfo cuts a message into pieces of 45 characters (DATA_INFO_TAG_LEN), one a row, the first
under its label: they are joined back whole, spaces at the cuts kept where the box's columns are intact.

JSON (`-j`), from Diag.cpp HelperJsonBuildOutput and testing/python3/dcgm_diag_schema.json (4.x): {"DCGM
Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"entity_group", "entity_id",
"status", "warnings": [{"warning", ...}], "info": [...]}], "test_summary": {"status"}}]}]}, "entity_groups":
[{"entity_group": "GPU", "entities": [{"entity_id", "device_id"}]}], "metadata": {"version", "Driver Version
Detected"}}; DCGM 3.x and before: {"DCGM GPU Diagnostic": {"test_categories": [... "results": [{"gpu_id" or
"gpu_ids": "0,1", "status" ("PASS" or "Pass"), "warnings", "info" (a string or a list)}]], "version"},
"version", "Driver Version Detected"}.

Figures a message states, from the sources that print them: PCIe's addBandwidthInfo (nvvs/plugin_src/pcie/
PcieMain.cpp) "GPU to Host bandwidth:\\t\\t%.2f GB/s" (d2h), "Host to GPU bandwidth:" (h2d), "bidirectional
bandwidth:" (bidir); dcgm_errors.h DCGM_FR_LOW_BANDWIDTH_MSG "Bandwidth of GPU %u in direction %s of %.2f did
not exceed ..." (the direction's name, GB/s), DCGM_FR_MEMORY_BANDWIDTH_MSG "GPU %u only achieved a memory
bandwidth of %.2f GB/s" (memory_bandwidth), DCGM_FR_GFLOPS_THRESHOLD_VIOLATION_MSG "Detected %.2f %s for GPU %u
which is below the threshold" and DCGM_FR_STRESS_LEVEL_MSG "Max stress level of %.1f did not reach desired
stress level" (flops, GFLOPS: targeted stress's level is in gflops); DiagnosticPlugin.cpp "GPU %u calculated at
approximately %.2f gigaflops during this test" (flops)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.paste.found import Found, json_blocks, listed

READER = "dcgmi diag"
PIECE = 45  # DATA_INFO_TAG_LEN: a message is printed 45 characters a row
MAX_TESTS = 1000
MAX_MESSAGES = 100  # per test
MAX_MESSAGE = 4000  # characters of one message

QUOTE = re.compile(r"^[>\s]+")
HEADER = re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|")
RULE = re.compile(r"^\+[-=+]*$")
CATEGORY = re.compile(r"^[+|]-----  (\w[\w ]*?)  -+\+-+[+|]\s*$")
LABEL = re.compile(r"^(Warning|Info|Error)(?::\s*([A-Za-z]+)(\d+))?$")
ENTITY = re.compile(r"^([A-Za-z]+)(\d+): (Pass|Fail|Warn|Skip|Not Run)$")
LISTED = re.compile(r"^(Pass|Fail|Warn|Skip) - (?:(All)|GPUs?: ([\d, ]+?))\s*$")
RESULT = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)$")
METADATA = {"DCGM Version": "version", "Driver Version Detected": "driver_version"}
SETTINGS = ("Detected", "Version")  # the other metadata rows: "GPU Device IDs Detected", "EUD Test Version"
WORST = ("fail", "warn", "pass", "skip", "not run")
NUMBER = r"(\d+(?:\.\d+)?)"
STRESS = rf"Max stress level of {NUMBER} did not (?:reach|exceed) desired stress level of [\d.]+ for GPU (\d+)"
FIGURES = (
    (re.compile(rf"(?:GPU (\d+) )?(GPU to Host|Host to GPU|bidirectional) bandwidth:\s*{NUMBER} ?([GM]B/s)"), None),
    (re.compile(rf"Bandwidth of GPU (\d+) in direction (\w+) of {NUMBER} did not exceed"), "GB/s"),
    (re.compile(rf"GPU (\d+) only achieved a memory bandwidth of {NUMBER} ([GM]B/s)"), "memory_bandwidth"),
    (re.compile(rf"GPU (\d+) calculated at approximately {NUMBER} gigaflops"), "flops"),
    (re.compile(rf"Detected {NUMBER} \S*[Ff][Ll][Oo][Pp]\S* for GPU (\d+) which is below"), "flops"),
    (re.compile(STRESS), "flops"),
)
DIRECTIONS = {"GPU to Host": "d2h", "Host to GPU": "h2d", "bidirectional": "bidir"}


@dataclass
class Diag:
    """What the paste's diagnostic output states, gathered before it is recorded as one fact."""

    line: int | None = None  # 0-based
    format: str = "text"
    metadata: dict[str, tuple[str, int]] = field(default_factory=dict)
    gpus: set[int] = field(default_factory=set)
    tests: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Box:
    """Where the reading of one box is: its category, its test, the message being joined from its pieces."""

    category: str | None = None
    test: dict[str, Any] | None = None
    pieces: list[str] | None = None
    entity: int | None = None  # the GPU a "Warning: GPU0" row names


def read(found: Found) -> None:
    """`dcgmi diag`'s boxes and JSON anywhere in the paste; nothing from lines that are not theirs."""
    diag = Diag()
    read_text(found, diag)
    for key in ("DCGM Diagnostic", "DCGM GPU Diagnostic"):
        for start, _, obj in json_blocks(found, key):
            read_json(diag, start, obj, obj[key])
    record(found, diag)


# The lines a box may open at (opens_box decides): its header, a category bar, a row of its own widths.
OPENS = re.compile(r"^(?:>|[^\S\n])*(?:\|[^\S\n]*Diagnostic|[+|]-----  |\|[^\n]{27}\| )", re.MULTILINE)


def read_text(found: Found, diag: Diag) -> None:
    after = 0
    for number in found.matching(OPENS):
        text = QUOTE.sub("", found.lines[number]).rstrip()
        if number < after or not text.startswith(("|", "+")) or not opens_box(text):
            continue
        box = Box()
        start(diag, number)
        box_line(diag, box, number, text)
        after = number + 1
        while after < len(found.lines) and continues(text := QUOTE.sub("", found.lines[after]).rstrip()):
            box_line(diag, box, after, text)
            after += 1
        close_message(diag, box)


def continues(text: str) -> bool:
    """A line of the box: a rule ("+----+----+", "+====+"), a category bar, or a row of two cells, in the box's
    own columns or, where a paste lost them, holding what a diagnostic prints (a result, a labelled message, a
    metadata field); another table's rows (a log viewer's `| time | message |` lines) end it."""
    if RULE.match(text) or CATEGORY.match(text):
        return True
    cells = row(text)
    if cells is None:
        return False
    label, value, intact = cells
    shown = value.strip()
    said = RESULT.match(shown) or LISTED.match(shown) or ENTITY.match(shown) or LABEL.match(label)
    return intact or bool(said) or label in METADATA or not label


def opens_box(text: str) -> bool:
    """The header, a category bar, or a row of the box's own widths holding a 3.x result ("Pass - All") or
    labelled "Warning", "Info" or "Error": what only a diagnostic prints; a box pasted from its middle starts
    at the first of them."""
    if HEADER.match(text) or CATEGORY.match(text):
        return True
    cells = row(text)
    if cells is None or not cells[2]:
        return False
    return bool(LISTED.match(cells[1].strip()) or LABEL.match(cells[0]))


def start(diag: Diag, number: int, form: str = "text") -> None:
    if diag.line is None:
        diag.line, diag.format = number, form


def row(text: str) -> tuple[str, str, bool] | None:
    """A data row's label, its value, and whether the box's columns are intact: then the value is its 46
    columns as printed (a piece of a message may begin or end with the space the cut fell on), else the text
    between the bars."""
    if len(text) >= 30 and text[0] == "|" and text[28] == "|" and text[29] == " ":
        value = text[30:76] if len(text) >= 78 and text[77] == "|" else text[30:].rstrip("|")
        return text[1:28].strip(), value, True
    parts = text.split("|")
    if parts[0] or len(parts) not in (3, 4) or (len(parts) == 4 and parts[3].strip()) or not "".join(parts[2:]).strip():
        return None  # two cells, the closing bar possibly cut: "| label | value |", "| label | val"
    return parts[1].strip(), parts[2].strip(), False


def box_line(diag: Diag, box: Box, number: int, text: str) -> None:
    if match := CATEGORY.match(text):
        close_message(diag, box)
        box.category = match.group(1).strip()
        return
    cells = row(text) if text.startswith("|") and not HEADER.match(text) else None
    if cells is None:
        return
    label, value, intact = cells
    piece = value[:PIECE] if intact else value.strip()
    shown = value.strip()
    if label in METADATA:
        diag.metadata.setdefault(METADATA[label], (shown, number))
    elif not label:
        unlabelled(diag, box, piece, shown)
    elif match := LABEL.match(label):
        close_message(diag, box)
        box.pieces = [piece]
        box.entity = int(match.group(3)) if match.group(2) == "GPU" else None
    elif box.category != "Metadata" and not label.endswith(SETTINGS) and len(diag.tests) < MAX_TESTS:
        close_message(diag, box)
        box.test = new_test(label, box.category)
        diag.tests.append(box.test)
        test_result(diag, box.test, shown)


def unlabelled(diag: Diag, box: Box, piece: str, shown: str) -> None:
    """A row with no label: a GPU's result ("GPU0: Pass", "Fail - GPU: 0"), or the next piece of a message;
    pieces are joined as printed (a cut falls mid-word more often than on a space)."""
    entity, listed = ENTITY.match(shown), LISTED.match(shown)
    if box.test is not None and (entity or listed):
        close_message(diag, box)
        if entity and entity.group(1) == "GPU":
            gpu_result(diag, box.test, int(entity.group(2)), entity.group(3))
        elif listed:
            test_result(diag, box.test, shown)
    elif box.pieces is not None:
        if len(box.pieces) * PIECE < MAX_MESSAGE:
            box.pieces.append(piece)
    elif shown and box.test is not None:  # 3.x prints the diagnostic's return code under its result
        box.pieces, box.entity = [shown], None


def close_message(diag: Diag, box: Box) -> None:
    """The message whose pieces were gathered, whole, to its test (a test of its own where the paste cut the
    test's row)."""
    pieces, box.pieces = box.pieces, None
    message = "".join(pieces or []).strip()
    if not message:
        return
    if box.test is None and len(diag.tests) < MAX_TESTS:
        box.test = new_test(None, box.category)
        diag.tests.append(box.test)
    if box.test is not None:
        add_message(box.test, message, box.entity)


def add_message(test: dict[str, Any], message: str, gpu: int | None) -> None:
    if len(test["messages"]) < MAX_MESSAGES:
        test["messages"].append(message[:MAX_MESSAGE])
        test["figures"].extend(figures(message, gpu))


def figures(message: str, gpu: int | None) -> list[dict[str, Any]]:
    """The figures a message states (see the module's docstring for where each is printed); `gpu` is the GPU
    the message is about where the message does not name it."""
    found: list[dict[str, Any]] = []
    for pattern, kind in FIGURES:
        for match in pattern.finditer(message):
            found.append(figure(match, kind, gpu))
    return found


def figure(match: re.Match[str], kind: str | None, gpu: int | None) -> dict[str, Any]:
    groups = match.groups()
    if kind is None:  # PCIe's info: [GPU n] direction, value, unit
        named, direction, value, unit = groups
        return {"gpu": int(named) if named else gpu, "name": DIRECTIONS[direction], "value": float(value), "unit": unit}
    if kind == "GB/s":  # a low bandwidth: GPU, direction, value
        return {"gpu": int(groups[0]), "name": groups[1], "value": float(groups[2]), "unit": "GB/s"}
    if kind == "memory_bandwidth":
        return {"gpu": int(groups[0]), "name": kind, "value": float(groups[1]), "unit": groups[2]}
    index, value = (groups[0], groups[1]) if "calculated" in match.group(0) else (groups[1], groups[0])
    return {"gpu": int(index), "name": "flops", "value": float(value), "unit": "GFLOPS"}


def new_test(name: str | None, category: str | None) -> dict[str, Any]:
    return {"name": name, "category": category, "result": None, "gpus": {}, "messages": [], "figures": []}


def test_result(diag: Diag, test: dict[str, Any], shown: str) -> None:
    """ "Pass" (4.x), "Pass - All", "Fail - GPU: 0" or "Pass - GPUs: 1, 2" (3.x)."""
    if RESULT.match(shown):
        test["result"] = shown.lower()
    elif match := LISTED.match(shown):
        if match.group(2):
            test["result"] = match.group(1).lower()
            return
        for index in re.findall(r"\d+", match.group(3)):
            gpu_result(diag, test, int(index), match.group(1))
        test["result"] = worst(test["gpus"].values())
    elif shown:
        test["result"] = shown.lower()


def gpu_result(diag: Diag, test: dict[str, Any], index: int, result: str) -> None:
    if index < 1024:
        test["gpus"][str(index)] = result.lower()
        diag.gpus.add(index)


def worst(results: Any) -> str | None:
    seen = set(results)
    return next((result for result in WORST if result in seen), None)


def read_json(diag: Diag, number: int, obj: dict[str, Any], body: dict[str, Any]) -> None:
    """`dcgmi diag -j`'s object, 4.x or before (see the module's docstring)."""
    start(diag, number, "json")
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    for where in (metadata, obj, body):
        for key, name in (("version", "version"), ("Driver Version Detected", "driver_version")):
            if isinstance(where.get(key), str) and where[key]:
                diag.metadata.setdefault(name, (where[key], number))
    for group in listed(obj.get("entity_groups")):
        if isinstance(group, dict) and group.get("entity_group") == "GPU":
            for entity in listed(group.get("entities")):
                if isinstance(entity, dict) and isinstance(entity.get("entity_id"), int):
                    diag.gpus.add(entity["entity_id"])
    for category in listed(body.get("test_categories")):
        if not isinstance(category, dict):
            continue
        for test in listed(category.get("tests")):
            if isinstance(test, dict) and len(diag.tests) < MAX_TESTS:
                diag.tests.append(json_test(diag, test, category.get("category")))


def json_test(diag: Diag, entry: dict[str, Any], category: Any) -> dict[str, Any]:
    name = entry.get("name")
    test = new_test(name if isinstance(name, str) else None, category if isinstance(category, str) else None)
    for result in listed(entry.get("results")):
        if isinstance(result, dict):
            json_result(diag, test, result)
    summary = entry.get("test_summary")
    if isinstance(summary, dict) and isinstance(summary.get("status"), str):
        test["result"] = status(summary["status"])
        for message, gpu in json_messages(summary, None):
            if message not in test["messages"]:
                add_message(test, message, gpu)
    if test["result"] is None:
        test["result"] = worst(test["gpus"].values()) or test.get("own")
    test.pop("own", None)
    return test


def json_result(diag: Diag, test: dict[str, Any], result: dict[str, Any]) -> None:
    """One result: a GPU's (4.x "entity_group" GPU, 3.x "gpu_id", 1.7 "gpu_ids": "0,1") or the test's own."""
    shown = status(result.get("status"))
    gpus = result_gpus(result)
    for index in gpus:
        if shown:
            gpu_result(diag, test, index, shown)
    if not gpus and shown:
        test["own"] = shown
    for message, gpu in json_messages(result, gpus[0] if len(gpus) == 1 else None):
        add_message(test, message, gpu)


def result_gpus(result: dict[str, Any]) -> list[int]:
    if "entity_group" in result:
        entity = result.get("entity_id")
        return [entity] if result.get("entity_group") == "GPU" and isinstance(entity, int) else []
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if isinstance(ids, int):
        return [ids]
    return [int(part) for part in re.findall(r"\d+", ids)] if isinstance(ids, str) else []


def json_messages(result: dict[str, Any], gpu: int | None) -> list[tuple[str, int | None]]:
    """A result's warnings ({"warning": ...}; 3.x's deployment tests wrote {"warnings": ...}) and its info."""
    messages: list[tuple[str, int | None]] = []
    for warning in listed(result.get("warnings")):
        text = warning.get("warning", warning.get("warnings")) if isinstance(warning, dict) else warning
        if isinstance(text, str) and text.strip():
            messages.append((text.strip(), gpu))
    info = result.get("info")
    for text in [info] if isinstance(info, str) else listed(info):
        if isinstance(text, str) and text.strip():
            messages.append((text.strip(), gpu))
    return messages


def status(value: Any) -> str | None:
    """ "PASS", "Pass", "Skip - All", "Not Run" as "pass", "skip", "not run"."""
    if not isinstance(value, str):
        return None
    return value.split(" - ")[0].strip().lower() or None


def record(found: Found, diag: Diag) -> None:
    if diag.line is None or not (diag.tests or diag.metadata):
        return
    if "driver_version" in diag.metadata:
        value, number = diag.metadata["driver_version"]
        found.fact("nvml.driver_version", value, READER, number)
    for test in diag.tests:
        test["gpus"] = dict(sorted(test["gpus"].items(), key=lambda item: int(item[0])))
    section = {
        "line": diag.line + 1,
        "format": diag.format,
        "version": diag.metadata.get("version", (None, 0))[0],
        "driver_version": diag.metadata.get("driver_version", (None, 0))[0],
        "gpus": [{"index": index, "name": None, "bus_id": None} for index in sorted(diag.gpus)],
        "tests": diag.tests,
    }
    found.fact("benchmarks.dcgm_diag", section, READER, diag.line)
