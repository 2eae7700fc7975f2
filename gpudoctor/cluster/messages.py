"""What a value read from the cluster's store must look like before anybody acts on it.

Sealing (credential.py) says a value was written by this run; these checks say it is one rank 0 or a node can
use: the types rank 0 and the nodes read, ranks inside the run, node names as the launcher names them. A value
that fails is treated as never sent, with the reason, never as a crash.
"""

from __future__ import annotations

from typing import Any

from gpudoctor.cluster.env import NODE_NAME
from gpudoctor.model import Status, finite_number

STATUSES = tuple(s.value for s in Status)  # a tuple: `in` on a set raises for a list or dict
MAX_LOCAL_RANKS = 4096


def node_name(value: Any) -> bool:
    return isinstance(value, str) and bool(NODE_NAME.match(value))


def _text(value: Any, limit: int = 65536) -> bool:
    return isinstance(value, str) and len(value) <= limit


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(_text(v) for v in value)


def join_problem(value: Any, expected: str | None) -> str | None:
    """Why a join is not one; `expected` is the name the launcher gives this rank (Slurm's node list)."""
    if not isinstance(value, dict) or not node_name(value.get("name")):
        return "joined with a message that is not a join"
    if expected and value["name"] != expected:
        return f"joined as {value['name']!r}, but the launcher runs this rank on {expected}"
    if not _texts(value.get("cluster_checks", [])):
        return "joined with a check list that is not one"
    return None


def report_problem(value: Any, rank: int) -> str | None:
    """Why a node's report (node.node_report) is not one rank 0 can judge."""
    if not isinstance(value, dict):
        return "sent a report that is not an object"
    simple = {
        "name": node_name(value.get("name")),
        "rank": value.get("rank") == rank,
        "status": value.get("status") in STATUSES,
        "exit_code": value.get("exit_code") is None or _whole(value.get("exit_code"), 0, 255),
        "failing": _texts(value.get("failing", [])),
        "warning": _texts(value.get("warning", [])),
        "cluster_checks": _texts(value.get("cluster_checks", [])),
        "figures": isinstance(value.get("figures", {}), dict)
        and all(_text(k) and finite_number(v) for k, v in value.get("figures", {}).items()),
        "infiniband": isinstance(value.get("infiniband", []), list),
        "network": _network(value.get("network", {})),
        "software": _software(value.get("software", {})),
        "checks": isinstance(value.get("checks"), list) and all(_check(c) for c in value["checks"]),
    }
    wrong = [field for field, good in simple.items() if not good]
    return f"sent a report whose {', '.join(wrong)} is not what a node sends" if wrong else None


def _network(value: Any) -> bool:
    """A node's network summary (node.network): its NICs with numbers, texts, a domain name or none."""
    if not isinstance(value, dict):
        return False
    nics = value.get("nics", [])
    return (
        isinstance(nics, list)
        and all(isinstance(n, dict) and _text(n.get("device")) and finite_number(n.get("gbits")) for n in nics)
        and _texts(value.get("left_out", []))
        and (value.get("nvlink_domain") is None or _text(value.get("nvlink_domain")))
        and (value.get("model") is None or _text(value.get("model")))
        and finite_number(value.get("gpus", 0))
    )


def _software(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    versions, settings = value.get("versions", {}), value.get("settings", {})
    good_versions = isinstance(versions, dict) and all(
        v is None or _text(v, 256) or finite_number(v) for v in versions.values()
    )
    return good_versions and isinstance(settings, dict) and all(_text(v, 4096) for v in settings.values())


def _check(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    return (
        _text(value.get("check_id"), 256)
        and value.get("status") in STATUSES
        and _text(value.get("summary"))
        and isinstance(value.get("metrics", []), list)
        and all(_metric(m) for m in value.get("metrics", []))
        and isinstance(value.get("rows", []), list)
        and all(isinstance(r, dict) and r.get("status") in STATUSES for r in value.get("rows", []))
    )


def _metric(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and _text(value.get("name"), 256)
        and (value.get("value") is None or finite_number(value.get("value")) or _text(value.get("value"), 4096))
        and isinstance(value.get("baseline", False), bool)
    )


def ready_ok(value: Any) -> bool:
    """`{"local_ranks": n}` or `{"absent": why}`."""
    if not isinstance(value, dict):
        return False
    if "absent" in value:
        return _text(value["absent"], 4096)
    return _whole(value.get("local_ranks"), 1, MAX_LOCAL_RANKS)


def outcome_ok(value: Any) -> bool:
    """A node's share of a cross-node workload: its status, message and ranks."""
    if not isinstance(value, dict) or value.get("status") not in STATUSES or not _text(value.get("message")):
        return False
    ranks = value.get("ranks", [])
    return isinstance(ranks, list) and all(_rank(r) for r in ranks)


def _rank(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and _whole(value.get("rank"), 0, 10**7)
        and (value.get("exit_code") is None or _whole(value.get("exit_code"), -255, 255))
        and set(value) <= {"rank", "exit_code", "data", "error", "phase", "stopped_by_launcher", "exit_round", "seq"}
        and all(_text(value.get(k, "")) for k in ("error", "phase"))
    )


def plan_ok(value: Any) -> bool:
    """Rank 0's plan for an attempt: `{"done": true}`, or each node's span, the world, where to meet, the
    time limit and the parameters rank 0 adds."""
    if not isinstance(value, dict):
        return False
    if value.get("done") is True:
        return True
    spans = value.get("spans")
    good_spans = isinstance(spans, dict) and all(
        isinstance(k, str)
        and k.isascii()
        and k.isdigit()
        and isinstance(v, list)
        and len(v) == 2
        and all(_whole(n, 0, 10**7) for n in v)
        for k, v in spans.items()
    )
    return (
        good_spans
        and _whole(value.get("world_size"), 1, 10**7)
        and _text(value.get("master_addr"), 253)
        and _whole(value.get("port"), 1, 65535)
        and finite_number(value.get("timeout_s"))
        and value["timeout_s"] > 0
        and isinstance(value.get("params"), dict)
    )


def verdict_ok(value: Any) -> bool:
    """Rank 0's verdict about a node: a status and the findings that name it."""
    return isinstance(value, dict) and value.get("status") in STATUSES and _texts(value.get("findings", []))
