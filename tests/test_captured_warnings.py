"""Cluster mode's own NCCL logs (issue 50): each rank sends what its log says (checks/ranks/links.read_log) with its
network WARNs cut as its other warnings are, saying how many were left out, and rank 0 judges each node's WARNs
with gpudoctor/judging/net_warnings.py as network.nccl judges a pasted log's: quoted, named by the node, never more
than a warning (a log line says why; the measurement judges the node). Pure judges on the gathered data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudoctor.judging import net_warnings, sockets
from gpudoctor.model import Status

COMPLETION = "NET/IB : Got completion from peer 10.0.0.{n}<50123> with status=12 opcode=0 len=0 vendor err 129 (Recv)"


def warns(count: int) -> list[dict[str, Any]]:
    """`count` distinct network WARNs as the reader keeps them."""
    return [
        {"line": n + 1, "source": "net_ib.cc:1696", "text": COMPLETION.format(n=n), "plugin": False}
        for n in range(count)
    ]


def test_a_rank_sends_its_first_network_warns_and_says_how_many_it_left_out(tmp_path: Path) -> None:
    """A rank's log with 8 network WARNs: 5 go to rank 0 (as its warnings do), and the 3 left out are counted."""
    from gpudoctor.checks.ranks.links import read_log

    lines = [f"h:1:2 [0] net_ib.cc:1696 NCCL WARN {COMPLETION.format(n=n)}" for n in range(8)]
    (tmp_path / "nccl.77.log").write_text("\n".join(lines) + "\n")
    said = read_log(tmp_path)
    assert len(said["net_warnings"]) == net_warnings.SENT == 5 and said["net_warnings_left_out"] == 3
    assert len(said["warnings"]) == 5


def test_what_another_node_sent_is_cut_again_on_arrival() -> None:
    """A node that sends 50 WARNs of 100 kB each and a count that is no number: rank 0 keeps 5, each text cut."""
    huge = [{**w, "text": "x" * 100_000} for w in warns(50)]
    said = sockets.transport_of(
        {"backend": "nccl", "networks": {}, "nccl": {"net_warnings": huge, "net_warnings_left_out": "many"}}
    )
    kept = said["nccl"]["net_warnings"]
    assert len(kept) == 5 and all(len(w["text"]) <= 512 for w in kept)
    assert said["nccl"]["net_warnings_left_out"] == 45


def node(nccl: dict[str, Any]) -> dict[str, Any]:
    return {"backend": "nccl", "networks": {}, "nccl": {"net": "IB", "nodes": 3, "gdrdma": "on", **nccl}}


def test_rank_0_judges_each_nodes_network_warns_as_a_pasted_log() -> None:
    """Node b's log holds a failed completion and names 3 more left out; a and c hold none: one warning that names
    b, quotes its line, gives the cure net_warnings gives, and says what b left out; never a failure (no drain)."""
    per_node = {
        "a": node({}),
        "b": node({"net_warnings": warns(1), "net_warnings_left_out": 3}),
        "c": node({}),
    }
    judged = net_warnings.across_nodes(per_node)
    assert judged is not None and judged.status == Status.WARN and judged.aspect == "net-warnings"
    assert judged.summary.startswith("b: NCCL's network code warned: a network call failed")
    assert [row.node for row in judged.rows] == ["b"] and judged.rows[0].status == Status.WARN
    assert judged.quotes == [f"b: line 1: net_ib.cc:1696 NCCL WARN {COMPLETION.format(n=0)}"]
    assert judged.remediation is not None and "did not form" in judged.remediation.why
    assert "b: 3 more network WARNs in its own log" in judged.detail


def test_a_fallback_a_nodes_settings_explain_is_said_with_its_cause() -> None:
    """NCCL_IB_DISABLE=1 in node c's settings and its 'No device found' fallback: the cause's summary and cure."""
    fallback = {"line": 4, "source": "net_ib.cc:212", "text": "NET/IB : No device found.", "plugin": False}
    per_node = {"a": node({}), "c": node({"net": "Socket", "net_warnings": [fallback]})}
    per_node["c"]["nccl"]["settings"] = {"NCCL_IB_DISABLE": "1"}
    judged = net_warnings.across_nodes(per_node)
    assert judged is not None and judged.rows[0].name == "nccl-ib-disabled"
    assert "NCCL_IB_DISABLE=1" in judged.summary and "unset NCCL_IB_DISABLE" in judged.remediation.commands


def test_nodes_without_network_warns_add_no_result() -> None:
    assert net_warnings.across_nodes({"a": node({}), "b": {"backend": "gloo", "networks": {}, "nccl": {}}}) is None
