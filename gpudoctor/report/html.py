"""One self-contained HTML page for a report: a node's, or rank 0's for a whole cluster. A pure function of the
JSON document, so a saved report renders the same anywhere (`gpudoctor report DOC.json --html FILE`).

No network, no server: the CSS and the few lines of JavaScript (filter, search, a node's details on click)
are inline, and a Content-Security-Policy lets nothing else run or load; the policy names the two by their
hashes. Every text from a node (host names, summaries, plugin messages, environment values) is escaped where
it is written, and the script reads only data attributes and sets only text and `hidden`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections import Counter
from typing import Any

from gpudoctor.model import finite_number
from gpudoctor.report.document import SCHEMA_VERSION

STATUSES = ("fail", "error", "timeout", "warn", "pass", "skip")
RANK = {status: n for n, status in enumerate(STATUSES)}  # worst first
RING_PER_LINE = 100  # nodes per line of the ring picture
CELL_W, CELL_H = 8, 6
OFFSETS = (-2, -1, 1, 2)  # the ring neighbours each node sends to (checks/pairs.py)

STYLE = """
:root{--pass:#2e7d32;--warn:#f9a825;--fail:#c62828;--error:#8e24aa;--timeout:#c62828;--skip:#9e9e9e;
--bg:#fff;--fg:#1b1b1b;--muted:#666;--line:#ddd}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px 24px;
color:var(--fg);background:var(--bg)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 8px;border-bottom:1px solid var(--line)}
.meta,.muted{color:var(--muted)}
.badge{display:inline-block;padding:1px 7px;border-radius:3px;color:#fff;font-weight:600;font-size:12px;
text-transform:uppercase}
.pass{background:var(--pass)}.warn{background:var(--warn);color:#222}.fail{background:var(--fail)}
.error{background:var(--error)}.timeout{background:var(--timeout)}.skip{background:var(--skip)}
.counts span{margin-right:14px}
table{border-collapse:collapse;margin:4px 0 8px}
td,th{border-bottom:1px solid var(--line);padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{font-weight:600}
pre{background:#f4f4f4;padding:4px 8px;margin:2px 0;white-space:pre-wrap;word-break:break-all}
.problem{border-left:4px solid var(--fail);padding:4px 12px;margin:8px 0}
.problem.warn{border-color:var(--warn);background:none;color:inherit}
#grid{display:flex;flex-wrap:wrap;gap:2px;max-width:1200px}
#grid button{width:14px;height:14px;padding:0;border:0;border-radius:2px;cursor:pointer}
#grid button:focus{outline:2px solid #000}
#filters label{margin-right:12px}
#detail section{border:1px solid var(--line);padding:8px 12px;margin-top:8px}
.gpugrid td{text-align:center;padding:2px}
.gpugrid td.cell{width:26px;height:18px;border:1px solid #fff}
.gpugrid th.v{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:400;font-size:12px;padding:0 2px 4px}
svg text{font:10px system-ui,sans-serif;fill:#444}
[hidden]{display:none !important}
"""

SCRIPT = """
(function(){
var grid=document.getElementById("grid");if(!grid){return;}
var cells=Array.prototype.slice.call(grid.querySelectorAll("button"));
var boxes=Array.prototype.slice.call(document.querySelectorAll("#filters input[type=checkbox]"));
var search=document.getElementById("search"),shown=document.getElementById("shown");
var detail=document.getElementById("detail");
function apply(){
 var on={};boxes.forEach(function(b){on[b.value]=b.checked;});
 var q=search.value.trim().toLowerCase(),n=0;
 cells.forEach(function(c){var ok=on[c.dataset.status]&&(!q||c.dataset.name.toLowerCase().indexOf(q)>=0);
  c.hidden=!ok;if(ok){n++;}});
 shown.textContent=n+" of "+cells.length+" nodes shown";
}
boxes.forEach(function(b){b.addEventListener("change",apply);});
search.addEventListener("input",apply);
grid.addEventListener("click",function(ev){
 var c=ev.target.closest("button");if(!c){return;}
 Array.prototype.forEach.call(detail.querySelectorAll("section"),function(s){s.hidden=s.id!=="node-"+c.dataset.i;});
});
apply();
})();
"""


def render(document: dict[str, Any]) -> str:
    """The page for a report document: a cluster's when it has one, else a node's."""
    body = _cluster_body(document) if document.get("cluster") else _node_body(document)
    title = f"gpudoctor {document.get('status', '?')}: {document.get('host', '?')}"
    policy = (
        f"default-src 'none'; style-src '{_digest(STYLE)}'; script-src '{_digest(SCRIPT)}'; "
        "img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{e(policy)}">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{e(title)}</title>'
        f"<style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


def e(value: Any) -> str:
    """Any value as HTML text or attribute value: every markup character escaped."""
    return html.escape("" if value is None else str(value), quote=True)


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _badge(status: str) -> str:
    return f'<span class="badge {e(status)}">{e(status)}</span>'


def _header(document: dict[str, Any], what: str, counted: str = "checks") -> str:
    meta = [
        document.get("started_at"),
        f"level {document.get('level')}",
        document.get("source"),
        f"{document.get('duration_s', 0):.1f} s",
        f"gpudoctor {document.get('tool_version')}",
        f"exit code {document.get('exit_code')}",
    ]
    return (
        f"<h1>{_badge(document.get('status', 'skip'))} {e(what)}</h1>"
        f'<div class="meta">{" · ".join(e(m) for m in meta if m)}</div>'
        f'<p class="counts">{e(counted)}: {_counts(document.get("counts", {}))}</p>'
    )


def _counts(counts: dict[str, int]) -> str:
    return "".join(f"<span>{_badge(s)} {int(counts.get(s, 0))}</span>" for s in STATUSES if counts.get(s))


# --- one node ------------------------------------------------------------------------------------------------
def _node_body(document: dict[str, Any]) -> str:
    checks = document.get("checks", [])
    return "".join(
        [
            _header(document, f"node {document.get('host')}"),
            _problems(checks, document.get("causes")),
            _gpu_grid(checks),
            _figures(checks, old=document.get("schema_version", SCHEMA_VERSION) < 3),
            "<h2>Every check</h2>",
            _check_table(checks),
        ]
    )


def _problems(checks: list[dict[str, Any]], causes: list[dict[str, Any]] | None = None) -> str:
    """What is wrong, worst first: each cause the diagnosis found (with the findings it explains), then every
    problem no cause explains."""
    leading = [c for c in causes or [] if c.get("status") not in ("pass", "skip")]
    bad = sorted(
        (c for c in checks if c["status"] not in ("pass", "skip") and not c.get("explained_by")),
        key=lambda c: RANK[c["status"]],
    )
    if not bad and not leading:
        return "<h2>Problems</h2><p>None: every check that ran passed.</p>"
    return "<h2>Do this first</h2>" + "".join(_cause(c) for c in leading) + "".join(_problem(c) for c in bad)


def _cause(cause: dict[str, Any]) -> str:
    explains = ", ".join(cause.get("explains") or [])
    said = f"<div class='muted'>explains {e(explains)}</div>" if explains else ""
    source = f"<div class='muted'>why this cause: {e(cause.get('source'))}</div>" if cause.get("source") else ""
    return (
        f'<div class="problem {"warn" if cause["status"] == "warn" else ""}">'
        f"<div>{_badge(cause['status'])} <b>{e(cause['id'])}</b>: {e(cause['summary'])}</div>"
        f"{said}{_fix(cause.get('remediation'))}{source}</div>"
    )


def _problem(check: dict[str, Any]) -> str:
    rows = [r for r in check.get("rows", []) if r["status"] not in ("pass", "skip")]
    listed = "".join(f"<li>{_badge(r['status'])} {e(_where(r))}: {e(r['summary'])}</li>" for r in rows[:50])
    more = f"<li class='muted'>and {len(rows) - 50} more in the JSON report</li>" if len(rows) > 50 else ""
    return (
        f'<div class="problem {"warn" if check["status"] == "warn" else ""}">'
        f"<div>{_badge(check['status'])} <b>{e(_label(check))}</b>: {e(check['summary'])}</div>"
        f"{f'<ul>{listed}{more}</ul>' if listed else ''}{_fix(check.get('remediation'))}</div>"
    )


def _fix(fix: dict[str, Any] | None, label: str = "Fix") -> str:
    if not fix:
        return ""
    commands = "".join(f"<pre>$ {e(c)}</pre>" for c in fix.get("commands", []))
    return f"<div><b>{label}:</b> {e(fix.get('why'))}</div>{commands}{_fix(fix.get('instead'), 'Or')}"


def _label(check: dict[str, Any]) -> str:
    return check["check_id"] + (f":{check['aspect']}" if check.get("aspect") else "")


def _where(row: dict[str, Any]) -> str:
    if row.get("node") and row.get("peer"):
        return f"{row['node']} -> {row['peer']}"
    if row.get("index") is not None:
        return f"GPU {row['index']}"
    return row.get("node") or row.get("name") or row.get("pci_bus_id") or "-"


def _gpu_grid(checks: list[dict[str, Any]]) -> str:
    """GPUs down, the checks that judge each GPU across; a cell per verdict, its summary on hover."""
    per_gpu = [c for c in checks if any(r.get("index") is not None for r in c.get("rows", []))]
    gpus = sorted({r["index"] for c in per_gpu for r in c["rows"] if r.get("index") is not None})
    if not gpus:
        return ""
    head = "".join(f'<th class="v">{e(_label(c))}</th>' for c in per_gpu)
    lines = [f"<tr><th>GPU {e(gpu)}</th>{''.join(_gpu_cell(c, gpu) for c in per_gpu)}</tr>" for gpu in gpus]
    return f'<h2>GPU by check</h2><table class="gpugrid"><tr><th></th>{head}</tr>{"".join(lines)}</table>'


def _gpu_cell(check: dict[str, Any], gpu: int) -> str:
    row = next((r for r in check["rows"] if r.get("index") == gpu), None)
    status, text = (row["status"], row["summary"]) if row else ("", "not judged")
    return f'<td class="cell {e(status)}" title="{e(_label(check))}: {e(text)}"></td>'


def _figures(checks: list[dict[str, Any]], old: bool = False) -> str:
    """Each figure judged against a number: a bar of the figure, a tick for its pass line and one for the healthy
    figure that line is a fraction of (where known), its sources beside it and on hover. A report of schema 2
    (`old`) wrote its pass lines as text: read as numbers."""
    read = _numeric if old else (lambda metric: metric)
    found = []
    for check in checks:
        found += [(check, None, read(m)) for m in check.get("metrics", [])]
        found += [(check, r, read(m)) for r in check.get("rows", []) for m in r.get("metrics", [])]
    judged = [(c, r, m) for c, r, m in found if finite_number(m.get("value")) and finite_number(m.get("expected"))]
    if not judged:
        return ""
    lines = "".join(_figure_line(c, r, m) for c, r, m in judged[:FIGURES_SHOWN])
    more = len(judged) - FIGURES_SHOWN
    said = f"<p class='muted'>and {more} more in the JSON report</p>" if more > 0 else ""
    return f"<h2>Figures against their expectations</h2><table>{lines}</table>{said}"


# A pass line as reports before schema 3 wrote it, as text: ">= 519.2".
OLD_LINE = re.compile(r"\s*(>=|<=)\s*(\d{1,15}(?:\.\d{1,15})?)\s*")


def _numeric(metric: dict[str, Any]) -> dict[str, Any]:
    """A figure whose pass line an older report wrote as text (">= 519.2", with no comparison of its own) as the
    number and comparison the renderers read; any other figure as it is."""
    expected = metric.get("expected")
    found = OLD_LINE.fullmatch(expected) if isinstance(expected, str) and not metric.get("comparison") else None
    if found is None:
        return metric
    return {**metric, "comparison": found.group(1), "expected": float(found.group(2))}


FIGURES_SHOWN = 400
BAR_W, BAR_H, PAD = 200, 14, 2  # the bar's scale, its height and the margin either side (ticks at the ends)
HEALTHY = "#1565c0"


def _figure_line(check: dict[str, Any], row: dict[str, Any] | None, metric: dict[str, Any]) -> str:
    where = f"{_where(row)} " if row else ""
    labels = ", ".join(f"{k}={v}" for k, v in metric.get("labels", {}).items())
    status = _figure_status(metric, row["status"] if row else check["status"])
    reference = metric.get("reference") if finite_number(metric.get("reference")) else None
    source = metric.get("reference_source") if reference is not None else None
    hover = f' title="{e(source)}"' if source else ""
    return (
        f"<tr><td>{e(_label(check))}</td><td>{e(where)}{e(metric['name'])}"
        f"{f' <span class=muted>({e(labels)})</span>' if labels else ''}</td>"
        f"<td{hover}>{_bar(metric, status)}</td><td>{_figure_text(metric)}</td></tr>"
    )


def _figure_text(metric: dict[str, Any]) -> str:
    """`452.1 GB/s, pass >= 408 GB/s (how that line was set)` and, where known, `healthy 480 GB/s: <source>`
    (the source also on hover); a figure with no comparison reads `value of expected (source)` as before."""
    unit = metric.get("unit") or ""
    value, expected = e(_fmt(float(metric["value"]))), e(_fmt(float(metric["expected"])))
    how = f" <span class='muted'>({e(metric.get('expected_source') or 'expected')})</span>"
    comparison = _comparison(metric)
    if not comparison:
        return f"{value} {e(unit)} of {expected}{how}"
    text = f"{value} {e(unit)}, pass {e(comparison)} {expected} {e(unit)}{how}"
    if finite_number(metric.get("reference")):
        title = f' title="{e(metric["reference_source"])}"' if metric.get("reference_source") else ""
        text += f'<br><span class="muted"{title}>{e(_healthy(metric))}</span>'
    return text


def _comparison(metric: dict[str, Any]) -> str:
    """How the figure must stand against its pass line, ">=" or "<="; "" where the report does not say (an older
    report, a plugin), and the figure is drawn as one where more is better."""
    comparison = metric.get("comparison")
    return comparison if comparison in (">=", "<=") else ""


def _figure_status(metric: dict[str, Any], holder: str) -> str:
    """The figure's own colour: pass where it meets its pass line, else its row's (or check's) verdict, and at
    least warn (a check may pass on a figure that is not its worst)."""
    comparison = _comparison(metric)
    if not comparison:
        return holder
    value, expected = float(metric["value"]), float(metric["expected"])
    if value >= expected if comparison == ">=" else value <= expected:
        return "pass"
    return holder if holder not in ("pass", "skip") else "warn"


def _bar(metric: dict[str, Any], status: str) -> str:
    """The figure as a bar from 0; the pass line a black tick, the healthy figure a blue dashed one, and the side of
    the pass line that passes shaded green (right of it where more is better, left of it where less is): all on
    one scale, the largest of the three at 0.9 of the width."""
    value, expected = float(metric["value"]), float(metric["expected"])
    reference = float(metric["reference"]) if finite_number(metric.get("reference")) else None
    comparison, unit = _comparison(metric) or ">=", metric.get("unit") or ""
    top = max(value, expected, reference or 0.0) / 0.9 or 1.0

    def x(figure: float) -> float:
        return round(PAD + min(BAR_W, max(0.0, BAR_W * figure / top)), 1)

    line = x(expected)
    zone = (line, PAD + BAR_W) if comparison == ">=" else (PAD, line)
    said = [f"{_fmt(value)} {unit}".rstrip(), f"pass {comparison} {_fmt(expected)} {unit}".rstrip()]
    parts = [
        _rect(*zone, 0, BAR_H, "#e8f5e9"),
        _rect(PAD, x(value), 3, BAR_H - 6, _fill(status)),
        _tick(line, "#000", "", f"pass line: {comparison} {_fmt(expected)} {unit}"),
    ]
    if reference is not None:
        said.append(f"healthy {_fmt(reference)} {unit}".rstrip())
        parts.append(_tick(x(reference), HEALTHY, ' stroke-dasharray="3 2"', f"healthy: {_fmt(reference)} {unit}"))
    return (
        f'<svg width="{BAR_W + 2 * PAD}" height="{BAR_H}" role="img" aria-label="{e(", ".join(said))}">'
        f"{''.join(parts)}</svg>"
    )


def _rect(left: float, right: float, top: int, height: int, fill: str) -> str:
    return f'<rect x="{left}" y="{top}" width="{max(0.0, right - left):.1f}" height="{height}" fill="{fill}"/>'


def _tick(at: float, colour: str, dashes: str, said: str) -> str:
    return (
        f'<line x1="{at}" x2="{at}" y1="0" y2="{BAR_H}" stroke="{colour}" stroke-width="2"{dashes}>'
        f"<title>{e(said.rstrip())}</title></line>"
    )


def _fill(status: str) -> str:
    return {"pass": "#2e7d32", "warn": "#f9a825", "skip": "#9e9e9e", "error": "#8e24aa"}.get(status, "#c62828")


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _check_table(checks: list[dict[str, Any]]) -> str:
    lines = "".join(
        f"<tr><td>{_badge(c['status'])}</td><td>{e(_label(c))}</td><td>{e(c['summary'])}</td></tr>" for c in checks
    )
    return f"<table>{lines}</table>"


# --- a cluster -----------------------------------------------------------------------------------------------
def _cluster_body(document: dict[str, Any]) -> str:
    cluster = document["cluster"]
    nodes = cluster.get("nodes", [])
    return "".join(
        [
            _header(document, _cluster_title(document), "cross-node checks"),
            _problems([], document.get("causes")) if document.get("causes") else "",
            _verdicts(cluster),
            _node_grid(nodes),
            _findings(cluster.get("findings", [])),
            _ring(document.get("checks", []), nodes),
            _skew(document.get("checks", [])),
            "<h2>Cross-node checks</h2>",
            _problems(document.get("checks", [])),
            _check_table(document.get("checks", [])),
        ]
    )


def _cluster_title(document: dict[str, Any]) -> str:
    cluster = document["cluster"]
    nodes, launcher = len(cluster.get("nodes", [])), cluster.get("launcher")
    return f"cluster of {nodes} nodes ({launcher}), rank 0 on {document.get('host')}"


def _verdicts(cluster: dict[str, Any]) -> str:
    counts = Counter(n["verdict"]["status"] for n in cluster.get("nodes", []))
    words = (("fail", "to drain"), ("warn", "named, not drained"), ("pass", "fine"))
    parts = "".join(f"<span>{_badge(s)} {counts[s]} {word}</span>" for s, word in words if counts[s])
    drain = cluster.get("failed_nodes", [])
    return f'<p class="counts">{parts}</p>' + (f"<p><b>Drain:</b> {e(', '.join(drain))}</p>" if drain else "")


def _node_grid(nodes: list[dict[str, Any]]) -> str:
    statuses = [s for s in ("fail", "warn", "pass") if any(n["verdict"]["status"] == s for n in nodes)]
    boxes = "".join(f'<label><input type="checkbox" value="{s}" checked> {_badge(s)}</label>' for s in statuses)
    cells = "".join(
        f'<button type="button" class="{e(n["verdict"]["status"])}" data-i="{i}" data-name="{e(n["name"])}" '
        f'data-status="{e(n["verdict"]["status"])}" title="{e(n["name"])}: {e(n["verdict"]["status"])}"></button>'
        for i, n in enumerate(nodes)
    )
    details = "".join(_node_detail(i, n) for i, n in enumerate(nodes))
    return (
        "<h2>Nodes</h2>"
        f'<div id="filters">{boxes}<input id="search" type="search" placeholder="node name" '
        'aria-label="search nodes by name"> <span id="shown" class="muted"></span></div>'
        f'<div id="grid">{cells}</div><p class="muted">Click a node for its findings and its own checks.</p>'
        f'<div id="detail">{details}</div>'
    )


def _node_detail(i: int, node: dict[str, Any]) -> str:
    verdict = node["verdict"]
    findings = "".join(f"<li>{e(f)}</li>" for f in verdict.get("findings", []))
    own = node.get("checks", [])
    bad = [c for c in own if c["status"] not in ("pass", "skip")]
    checks = "".join(f"<li>{_badge(c['status'])} {e(_label(c))}: {e(c['summary'])}</li>" for c in bad)
    lost = f"<p>Lost: {e(node['lost'])}</p>" if node.get("lost") else ""
    said = f"<ul>{checks}</ul>" if checks else f"<p class='muted'>Its own {len(own)} checks: none failed.</p>"
    return (
        f'<section id="node-{i}" hidden><b>{e(node["name"])}</b> (rank {e(node.get("rank"))}) '
        f"{_badge(verdict['status'])}{lost}{f'<ul>{findings}</ul>' if findings else ''}{said}</section>"
    )


def _findings(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return "<h2>Named nodes and links</h2><p>None.</p>"
    lines = "".join(_finding(f) for f in findings[:500])
    more = f"<p class='muted'>and {len(findings) - 500} more in the JSON report</p>" if len(findings) > 500 else ""
    head = "<tr><th></th><th>where</th><th>check</th><th>figure</th><th>reference, allowance</th><th></th></tr>"
    return f"<h2>Named nodes and links, worst first</h2><table>{head}{lines}</table>{more}"


def _finding(finding: dict[str, Any]) -> str:
    where = f"{finding['node']} -> {finding['peer']}" if finding.get("peer") else finding["node"]
    figure = finding.get("figure") or {}
    value = f"{_fmt(figure['value'])} {figure.get('unit', '')}" if finite_number(figure.get("value")) else ""
    reference = figure.get("expected")
    reference = f"{_fmt(reference)} {figure.get('unit', '')}" if finite_number(reference) else reference
    reference = f"pass {_comparison(figure)} {reference}" if _comparison(figure) and reference else reference
    source = "; ".join(filter(None, (figure.get("expected_source"), _healthy(figure))))
    confirmed = {True: "confirmed", False: "not confirmed (never drained)"}.get(finding.get("confirmed"), "")
    return (
        f"<tr><td>{_badge(finding['status'])}</td><td><b>{e(where)}</b></td><td>{e(finding['check_id'])}</td>"
        f"<td>{e(value)}</td><td>{e(reference)} {e(source)}</td><td>{e(confirmed)}<br>"
        f"<span class='muted'>{e(finding['summary'])}</span></td></tr>"
    )


def _healthy(figure: dict[str, Any]) -> str:
    """`healthy 480 GB/s: <where that was published>` for a figure that carries its healthy reference, else ""."""
    if not finite_number(figure.get("reference")):
        return ""
    text = f"healthy {_fmt(figure['reference'])} {figure.get('unit') or ''}".rstrip()
    return text + (f": {figure['reference_source']}" if figure.get("reference_source") else "")


def _ring(checks: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> str:
    """Each node's first-look transfer to its ring neighbours (i-2, i-1, i+1, i+2), a column per node: a slow
    node shows as a dark column and as dark cells of its neighbours' columns."""
    figures = _transfers(checks)
    if not figures or len(nodes) < 2:
        return ""
    order = {n["name"]: i for i, n in enumerate(nodes)}
    top = sorted(figures.values())[(3 * len(figures)) // 4]
    top = top or 1.0
    rects = [_ring_cell(src, dst, gbps / top, gbps, order) for (src, dst), gbps in figures.items()]
    lines = (len(nodes) + RING_PER_LINE - 1) // RING_PER_LINE
    height = lines * (len(OFFSETS) * CELL_H + 8)
    width = min(len(nodes), RING_PER_LINE) * CELL_W + 4
    return (
        "<h2>Ring links</h2><p class='muted'>A column per node (rank order, "
        f"{RING_PER_LINE} a line), its transfers to ranks -2, -1, +1, +2 from top to bottom; colour: the "
        f"figure against the upper quartile of all ({e(_fmt(top))} GB/s), dark below 0.5. Hover for the figure.</p>"
        f'<svg id="ring" width="{width}" height="{height}" role="img" aria-label="ring link figures">'
        f"{''.join(rects)}</svg>"
    )


def _ring_cell(src: str, dst: str, ratio: float, gbps: float, order: dict[str, int]) -> str:
    """One transfer's cell (nothing for a pair that is not ring neighbours, as a re-test's are not)."""
    if src not in order or dst not in order:
        return ""
    offset = _offset(order[src], order[dst], len(order))
    if offset is None:
        return ""
    x, y = _cell(order[src], offset)
    tip = f"{src} -> {dst}: {gbps:.3g} GB/s ({ratio:.2f} of the upper quartile)"
    return (
        f'<rect x="{x}" y="{y}" width="{CELL_W - 1}" height="{CELL_H - 1}" fill="{_shade(ratio)}">'
        f"<title>{e(tip)}</title></rect>"
    )


def _transfers(checks: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """The links check's first-look figures by (sender, receiver)."""
    found = {}
    for check in checks:
        if check["check_id"] != "cluster.links":
            continue
        for metric in check.get("metrics", []):
            labels = metric.get("labels", {})
            if labels.get("stage") == "first" and finite_number(metric.get("value")) and "src" in labels:
                found[(str(labels["src"]), str(labels.get("dst")))] = float(metric["value"])
    return found


def _offset(src: int, dst: int, n: int) -> int | None:
    for offset in OFFSETS:
        if (src + offset) % n == dst:
            return offset
    return None


def _cell(index: int, offset: int) -> tuple[int, int]:
    line, column = divmod(index, RING_PER_LINE)
    return column * CELL_W + 2, line * (len(OFFSETS) * CELL_H + 8) + OFFSETS.index(offset) * CELL_H


def _shade(ratio: float) -> str:
    """Green at the reference, yellow at 0.75, red at 0.5, dark red below."""
    if ratio >= 0.9:
        return "#2e7d32"
    if ratio >= 0.75:
        return "#9ccc65"
    if ratio >= 0.6:
        return "#f9a825"
    if ratio >= 0.5:
        return "#ef6c00"
    return "#7f0000"


def _skew(checks: list[dict[str, Any]]) -> str:
    skew = [c for c in checks if c["check_id"] == "cluster.skew"]
    if not skew:
        return ""
    rows = [r for c in skew for r in c.get("rows", [])]
    lines = "".join(
        f"<tr><td>{_badge(r['status'])}</td><td>{e(_where(r))}</td><td>{e(r['summary'])}</td></tr>" for r in rows
    )
    said = "".join(f"<p>{_badge(c['status'])} {e(c['summary'])}</p>" for c in skew)
    return f"<h2>Skew between nodes</h2>{said}" + (f"<table>{lines}</table>" if lines else "")
