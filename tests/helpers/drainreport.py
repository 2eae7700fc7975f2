"""A small rank 0 cluster report and stand-ins for Slurm's sinfo and scontrol, for `gpudoctor drain`
(tests/test_drain.py, and the closed-pipe run in tests/test_malformed.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema

from gpudoctor.model import Metric, Result, Row, Status
from gpudoctor.report import document as doc

SLOW = [Metric("node_link_bandwidth", 0.01, "GB/s", expected=1.0, expected_source="upper quartile")]


def cluster_report(tmp_path: Path) -> Path:
    """n1 never joined; n2 slow (named by cluster.links); n0, n3, n4 fine."""
    results = [
        Result(
            Status.FAIL,
            "n2 slow",
            rows=[Row(Status.FAIL, "slow, confirmed", node="n2", metrics=SLOW, confirmed=True)],
            check_id="cluster.links",
            title="Links between nodes",
        )
    ]
    nodes = [{"name": n, "rank": i, "status": "pass", "exit_code": 0, "checks": []} for i, n in enumerate(("n0", "n2"))]
    nodes.insert(1, {"name": "n1", "rank": 1, "lost": "never joined within 20 s", "exit_code": None, "status": "error"})
    nodes += [{"name": n, "rank": i, "status": "pass", "exit_code": 0, "checks": []} for i, n in ((3, "n3"), (4, "n4"))]
    meta = {"host": "n0", "started_at": "2026-11-23T10:00:00+00:00", "duration_s": 1.0, "level": "standard"}
    document = doc.build_cluster(results, nodes, {**meta, "source": "live"}, False, False, "slurm")
    jsonschema.validate(document, doc.schema())
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(document))
    return path


def slurm_stand_ins(tmp_path: Path, states: str, scontrol_fails: str = "") -> tuple[dict[str, str], Path]:
    """sinfo printing `states` (node|state|reason lines) and scontrol recording its calls (or failing)."""
    folder, calls = tmp_path / "bin", tmp_path / "calls"
    folder.mkdir()
    (folder / "sinfo").write_text(f"#!/bin/sh\nprintf '{states}'\n")
    failing = f'echo "{scontrol_fails}" >&2; exit 1\n' if scontrol_fails else ""
    (folder / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n{failing}')
    for tool in ("sinfo", "scontrol"):
        (folder / tool).chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}, calls
