"""JUnit XML for CI dashboards: one testcase per result (fail -> failure, error and timeout -> error, skip ->
skipped), holding only what XML 1.0 allows whatever a check says."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from gpudoctor.report.monitoring import label

# What XML 1.0 allows (its Char production); anything else a check says is dropped from the JUnit file.
NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render(document: dict[str, Any]) -> str:
    """The whole JUnit XML file: one testsuite, one testcase per cause the diagnosis found, then per result."""
    counts = document["counts"]
    causes = document.get("causes") or []
    failed = sum(c["status"] == "fail" for c in causes)
    broke = sum(c["status"] in ("error", "timeout") for c in causes)
    suite = ET.Element(
        "testsuite",
        name="gpudoctor",
        tests=str(len(document["checks"]) + len(causes)),
        failures=str(counts["fail"] + failed),
        errors=str(counts["error"] + counts["timeout"] + broke),
        skipped=str(counts["skip"]),
        time=f"{document['duration_s']:.3f}",
        timestamp=document["started_at"],
        hostname=_xml(document["host"]),
    )
    for cause in causes:
        _add_case(suite, cause_case(cause))
    for result in document["checks"]:
        _add_case(suite, result)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def cause_case(cause: dict[str, Any]) -> dict[str, Any]:
    """A cause the diagnosis found, as a testcase (`gpudoctor.cause`, named by its id) of the same shape."""
    return {
        "check_id": "cause",
        "aspect": cause["id"],
        "status": cause["status"],
        "summary": cause["summary"],
        "duration_s": 0.0,
        "rows": [],
        "remediation": cause["remediation"],
    }


def _add_case(suite: ET.Element, result: dict[str, Any]) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=_xml(f"gpudoctor.{result['check_id'].split('.')[0]}"),
        name=_xml(label(result)),
        time=f"{result['duration_s']:.3f}",
    )
    status, text = result["status"], _xml(result["summary"])
    if status == "fail":
        ET.SubElement(case, "failure", message=text, type="fail").text = _xml(_details(result))
    elif status in ("error", "timeout"):
        ET.SubElement(case, "error", message=text, type=status).text = _xml(_details(result))
    elif status == "skip":
        ET.SubElement(case, "skipped", message=text)
    else:
        ET.SubElement(case, "system-out").text = text


def _details(result: dict[str, Any]) -> str:
    fix = result["remediation"]
    lines = [result["summary"], *(f"{r['summary']}" for r in result["rows"] if r["status"] != "pass")]
    while fix:
        lines += [fix["why"], *(f"$ {c}" for c in fix["commands"])]
        fix = fix.get("instead")
        if fix:
            lines.append("or:")
    return "\n".join(lines)


def _xml(text: str) -> str:
    """Text as XML 1.0 may hold it: control characters (a terminal colour, a bell, NUL) and lone surrogates
    dropped; markup characters are escaped by the writer."""
    return NOT_XML.sub("", text)
