"""Bounded, seeded mutation of every input gpudoctor reads: snapshots, nvidia-smi captures, saved reports,
configs and cluster-store values. Each mutant is either judged and rendered in every format, or refused with
gpudoctor's own one-line error; never a traceback, a hang or a lost file. Seeds are fixed (a failure names
its seed and mutant); the whole campaign stays well under a minute on two cores."""

from __future__ import annotations

import copy
import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.common import FIXTURES, SNAPSHOTS, gpudoctor

from gpudoctor import config, probe
from gpudoctor.cluster import messages
from gpudoctor.facts import snapshot
from gpudoctor.report import document as doc
from gpudoctor.report import html, junit, nagios, npd, prometheus

SEED = 20261124
JUNK: list[Any] = [
    None, True, 0, -1, 1.5, 10**400 // 10**390, "", "x" * 5000, "\x1b[2K\x1b[1A", [], {}, [[[[]]]], {"a": {"b": {}}},
    "NaN", "9" * 400, -(2**70), "../../etc/passwd", "ALL", "n[1-99999999]",
]  # fmt: skip
REFUSALS = (snapshot.SnapshotError, doc.ReportError, config.ConfigError, probe.UsageError)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value, as a tuple of keys and indexes."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            found += paths(item, (*prefix, index))
    return found


def mutate(value: Any, rng: random.Random) -> Any:
    """A copy of `value` with one to three places replaced by junk, deleted, or nested deep."""
    value = copy.deepcopy(value)
    for _ in range(rng.randint(1, 3)):
        place = rng.choice(paths(value)[1:] or [()])
        if not place:
            return rng.choice(JUNK)
        parent = value
        for step in place[:-1]:
            parent = parent[step]
        action = rng.random()
        if action < 0.15 and isinstance(parent, dict):
            parent.pop(place[-1], None)
        elif action < 0.2:
            parent[place[-1]] = [[[[[[parent[place[-1]]]]]]]]
        else:
            parent[place[-1]] = copy.deepcopy(rng.choice(JUNK))
    return value


def render_everywhere(document: dict[str, Any], results: list[Any]) -> None:
    from rich.console import Console

    from gpudoctor.report.console import render, render_cluster

    (render_cluster if "cluster" in document else render)(Console(file=io.StringIO(), width=100), document, results)
    doc.dumps(document)
    nagios.render(document)
    npd.render(document)
    junit.render(document)
    prometheus.render(document)
    html.render(document)


def judge(path: Path) -> None:
    try:
        report = probe.run(from_file=str(path))
    except REFUSALS as exc:
        assert "\n" not in str(exc).strip() and str(exc), str(exc)
        return
    render_everywhere(report.document, report.results)
    assert report.exit_code in (0, 1)


@pytest.mark.parametrize("name", ["h100-sxm-8x", "fault-xid-79", "h100-mig-8x"])
def test_mutated_snapshots(tmp_path: Path, name: str) -> None:
    rng = random.Random(f"{SEED}-{name}")
    original = json.loads((SNAPSHOTS / f"{name}.json").read_text())
    for n in range(30):
        path = tmp_path / f"{name}-{n}.json"
        path.write_text(json.dumps(mutate(original, rng)))
        try:
            judge(path)
        except Exception as exc:
            raise AssertionError(f"seed {SEED}-{name}, mutant {n}: {type(exc).__name__}: {exc}") from exc


def test_mutated_captures(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    capture = (FIXTURES / "nvidia-smi-xml" / "a100-sxm4-v12.xml").read_text()
    values = list(re.finditer(r">([^<>\n]+)<", capture))
    for n in range(80):
        text = capture
        for found in rng.sample(values, 5):
            junk = rng.choice(["9" * 400, "-1", "N/A", "", "0x", "1e999", "\x00", "&amp;", "]]>", "nan W"])
            text = text.replace(f">{found.group(1)}<", f">{junk}<", 1)
        if rng.random() < 0.2:
            text = text[: rng.randint(0, len(text))]
        path = tmp_path / f"capture-{n}.xml"
        path.write_text(text)
        try:
            judge(path)
        except Exception as exc:
            raise AssertionError(f"seed {SEED}, capture mutant {n}: {type(exc).__name__}: {exc}") from exc


def test_mutated_saved_reports(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    saved = json.loads(gpudoctor("check", "--from", str(SNAPSHOTS / "fault-ecc-uncorrectable.json"), "--json").stdout)
    from helpers.clusterreport import build

    for base in (saved, build(12)):
        for n in range(60):
            path = tmp_path / f"report-{n}.json"
            path.write_text(json.dumps(mutate(base, rng)))
            try:
                document, results = doc.load(path)
            except doc.ReportError as exc:
                assert "\n" not in str(exc).strip()
                continue
            except Exception as exc:
                raise AssertionError(f"seed {SEED + 1}, report mutant {n}: {type(exc).__name__}: {exc}") from exc
            try:
                render_everywhere(document, results)
            except Exception as exc:
                raise AssertionError(f"seed {SEED + 1}, report mutant {n}: {type(exc).__name__}: {exc}") from exc


def test_mutated_configs(tmp_path: Path) -> None:
    from gpudoctor.registry import discover

    specs = discover().specs
    rng = random.Random(SEED + 2)
    lines = ["level = 'standard'", "expect_gpus = 8", "timeout = 30", "[checks.health.ecc]", "correctable_warn = 100",
             "[checks.allreduce.bandwidth]", "iters = 20", "floor = 0.75"]  # fmt: skip
    junk = ["nan", "-inf", "1e308", "-1", "'x'", "[1, [2]]", "{a = 1}", "true", "'\\u0000'", "9" * 30, "= =", "[[x]]"]
    for n in range(150):
        text = [line if "=" not in line or rng.random() < 0.6 else f"{line.split('=')[0]}= {rng.choice(junk)}"
                for line in lines]  # fmt: skip
        path = tmp_path / f"config-{n}.toml"
        path.write_text("\n".join(text) + "\n")
        try:
            config.validate_checks(config.load(path), specs)
        except config.ConfigError as exc:
            assert "\n" not in str(exc).strip()
        except Exception as exc:
            raise AssertionError(f"seed {SEED + 2}, config mutant {n}: {type(exc).__name__}: {exc}") from exc


def test_mutated_store_values() -> None:
    """Every validator answers for any value a stranger could post; none raises."""
    rng = random.Random(SEED + 3)
    good = {
        "join": {"name": "n1", "version": "0.1.0", "cluster_checks": []},
        "report": {"name": "n1", "rank": 1, "status": "pass", "exit_code": 0, "checks": [], "cluster_checks": []},
        "ready": {"local_ranks": 1},
        "outcome": {"status": "pass", "message": "ok", "ranks": [{"rank": 1, "exit_code": 0}]},
        "plan": {"spans": {"1": [0, 1]}, "world_size": 1, "master_addr": "n0", "port": 1, "timeout_s": 5, "params": {}},
        "verdict": {"status": "pass", "findings": []},
    }
    for n in range(400):
        topic = rng.choice(sorted(good))
        value = mutate(good[topic], rng)
        try:
            answers = [
                messages.join_problem(value, "n1"),
                messages.report_problem(value, 1),
                messages.ready_ok(value),
                messages.outcome_ok(value),
                messages.plan_ok(value),
                messages.verdict_ok(value),
            ]
        except Exception as exc:
            raise AssertionError(f"seed {SEED + 3}, {topic} mutant {n}: {type(exc).__name__}: {exc}") from exc
        assert all(a is None or isinstance(a, bool | str) for a in answers)
