"""NCCL's own WARN lines about the network between nodes (`nccl.net_warnings`, gpudoctor/paste/nccl.py: those NCCL's
network code or a network plugin printed), judged for network.nccl: what each means, its status, the line quoted,
and its cure where one is known. Pure functions of facts.

A WARN is a finding: a failure where it says a network call failed (a connection between nodes did not form, or
broke) or NCCL fell back from its RDMA network, a warning where a peer went away (its own error comes first) or the
network was slow or said something else. A fallback on one node costs nothing (NCCL needs no network there) and is
left out; one that a cause of gpudoctor/judging/network.py already explains (NCCL_IB_DISABLE, no libibverbs, no OFI
provider) is quoted beneath that cause, not judged twice. Where gpudoctor knows the line (an error signature matched
it), the signature's check gives the cure; this names it rather than writing it twice.

In cluster mode each rank sends what its own NCCL log says (checks/ranks/links.read_log) with its WARNs cut to the
first few (`cut`, again on arrival: another node's message is not trusted), and rank 0 judges every node's as a
pasted log's (`across_nodes`), each named by its node, at most a warning: the line says why, the measurement
judges the node, and a WARN alone never drains one (a peer that went away is seen by every node)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudoctor.judging import network
from gpudoctor.model import Remediation, Result, Row, Status

SUMMARY_TEXT = 100  # characters of a WARN's text in a summary; the quote holds the whole line
# The causes of network.causes that a fallback WARN is the evidence of: the WARN is quoted beneath them.
FALLBACK_CAUSES = (
    "nccl-net-setting",
    "nccl-ofi-no-provider",
    "nccl-ib-disabled",
    "nccl-no-libibverbs",
    "rdma-devices-hidden",
)
DEBUG_SOURCE = "NVIDIA/nccl src/debug.cc (a WARN line: host:pid:tid [dev] file:line NCCL WARN message)"


@dataclass(frozen=True)
class Kind:
    """What a WARN says happened, told by the words NCCL or its plugin print for it (`markers`, first kind that
    matches wins), its status, what gpudoctor says of it, and the cure where one is known."""

    name: str
    markers: tuple[str, ...]
    status: Status
    meaning: str
    why: str
    source: str


KINDS = (
    Kind(
        "peer gone",
        ("closed by remote peer", "Connection reset by peer"),
        Status.WARN,
        "a peer closed its connection",
        "The peer's process closed its end: it most often ended on an error of its own (an exception, out of memory, "
        "a crash), which every other rank then sees as a network failure. Read the first error of that rank, in its "
        "own log, before suspecting the network.",
        "NVIDIA/nccl src/misc/socket.cc, socketProgress ('Connection closed by remote peer'); torch.distributed "
        "reports it as ncclRemoteError",
    ),
    Kind(
        "fell back",
        ("Failed to open libibverbs", "No device found", "fi_getinfo", "provider", "Error: network "),
        Status.FAIL,
        "NCCL could not use its RDMA network",
        "NCCL found no RDMA network it could open, so it carries traffic between nodes over TCP sockets (a tenth or "
        "less of what RDMA NICs carry) or does not start.",
        "NVIDIA/nccl src/misc/ibvwrap.cc ('Failed to open libibverbs.so[.1]'), src/transport/net_ib.cc ('NET/IB : No "
        "device found.'), src/net.cc ('Error: network %s not found.'); aws/aws-ofi-nccl (fi_getinfo)",
    ),
    Kind(
        "slow",
        ("ctrl timeout",),
        Status.WARN,
        "a peer sent no control message for 10 s",
        "GPUDirect-TCPX reports a connection whose peer sent no control message within its threshold (10 s by "
        "default): the peer is late (still starting, or stalled) or the path to it is slow. No cure is published "
        "(NVIDIA/nccl issue 1652 is open): look first at the node whose address the line names, after the '<-'.",
        "google/nccl-plugin-gpudirecttcpx src/net_tcpx.cc:1238 ('%s %s ctrl timeout cnt %lu, nanos %lu') and "
        "src/flags.cc (kTimeoutThresholdNs 10 s) at 4b8ea7f; NVIDIA/nccl issue 1652 (karakusc, 2025-03-21, GCP A3: "
        "up to an hour of wait when NCCL is first used)",
    ),
    Kind(
        "failed",
        ("Got completion", "failed", "Failed", "Unable to", "Error", "error", "timed out", "refused", "closing"),
        Status.FAIL,
        "a network call failed",
        "A call of the network between nodes failed (the line names it): connections between nodes did not form, "
        "or broke, and the communicator ends with an error.",
        "NVIDIA/nccl src/transport/net_ib (p2p.cc: 'Got completion from peer ... with status=...'), src/misc/"
        "ibvwrap.cc ('Call to ibv_... failed'), src/proxy.cc ('Failed to execute operation Connect'): each returns "
        "an error that ends the communicator",
    ),
)
OTHER = Kind("other", (), Status.WARN, "", "NCCL's network code warned; the line says about what.", DEBUG_SOURCE)


@dataclass(frozen=True)
class Warned:
    """One WARN line judged: its kind, who printed it, the line quoted, its cure, and whether a cause already
    explains it (then it is quoted beneath the cause, and is no finding of its own)."""

    kind: Kind
    who: str
    text: str
    quote: str
    line: int
    remediation: Remediation
    explained: bool

    @property
    def status(self) -> Status:
        return self.kind.status

    def said(self, times: int = 1) -> str:
        """ "the GPUDirect-TCPX plugin warned 2 times: a peer sent no control message for 10 s ('...')"."""
        told = f" {times} times" if times > 1 else ""
        meaning = f"{self.kind.meaning} " if self.kind.meaning else ""
        cut = self.text if len(self.text) <= SUMMARY_TEXT else self.text[: SUMMARY_TEXT - 3] + "..."
        return f"{self.who} warned{told}: {meaning}('{cut}')"


def kind_of(text: str) -> Kind:
    return next((k for k in KINDS if any(m in text for m in k.markers)), OTHER)


def printer(item: dict[str, Any], nccl: dict[str, Any]) -> str:
    """Who printed the WARN, in the user's words: the plugin by the fabric it gives, where the log names one, else
    NCCL's network code."""
    if not item.get("plugin"):
        return "NCCL's network code"
    fabric = network.fabric_of(str(nccl.get("plugin") or ""), nccl)
    return f"the {network.FABRICS[fabric]} plugin" if fabric else "the network plugin"


def warned(facts: dict[str, Any], causes: list[network.NetCause]) -> list[Warned]:
    """Every network WARN of NCCL's log, judged, in the log's order; a fallback on one node that no cause explains
    left out."""
    nccl = facts.get("nccl") or {}
    kept = [w for w in nccl.get("net_warnings") or [] if isinstance(w, dict) and isinstance(w.get("line"), int)]
    if not kept:
        return []
    signatures = (facts.get("paste") or {}).get("signatures") or []
    sightings = {s.get("line"): str(s.get("id")) for s in signatures if isinstance(s, dict)}
    explained = any(c.id in FALLBACK_CAUSES for c in causes)
    spans = network.between_nodes(facts, network.fabric(facts))
    found = []
    for item in kept:
        text, source, line = str(item.get("text") or ""), str(item.get("source") or ""), item["line"]
        kind = kind_of(text)
        fell_back = kind.name == "fell back"
        if fell_back and not (spans or explained):
            continue  # one node: NCCL needs no network there
        quote = f"line {line}: {source} NCCL WARN {text}" if source else f"line {line}: NCCL WARN {text}"
        cure = remedy(kind, sightings.get(line))
        found.append(Warned(kind, printer(item, nccl), text, quote, line, cure, fell_back and explained))
    return found


def remedy(kind: Kind, signature: str | None) -> Remediation:
    """The kind's cure; where an error signature knows the line, the signature's check gives the cure."""
    if signature is None:
        return Remediation(kind.why, source=kind.source)
    return Remediation(
        f"{kind.why} gpudoctor knows this message (signature {signature}): the check it belongs to gives its cause "
        "and cure in this report.",
        source=kind.source,
    )


def findings(found: list[Warned]) -> list[Warned]:
    """The WARNs that are findings of their own, the worst first (failures, then warnings), each in the log's order."""
    own = [w for w in found if not w.explained]
    return sorted(own, key=lambda w: w.status != Status.FAIL)


def summary(own: list[Warned]) -> str:
    """The lead WARN, said with how many lines of its kind the same printer gave."""
    lead = own[0]
    times = sum(1 for w in own if w.kind is lead.kind and w.who == lead.who)
    return lead.said(times)


# --- cluster mode: what each rank sends, and rank 0's verdict over every node's ----------------------------------

SENT = 5  # WARNs (and network WARNs) a rank sends of its log: each up to ~450 bytes, in every rank's outcome
SENT_CHARS = 512  # of a WARN's text or source, as sent
LEFT_OUT_MOST = 10**6
SETTINGS_MOST = 64


def cut(nccl: dict[str, Any]) -> dict[str, Any]:
    """NCCL's facts as a rank sends them (and as rank 0 takes another node's): its warnings and network WARNs, the
    first SENT of each, each text cut; how many network WARNs were left out (`net_warnings_left_out`)."""
    said = dict(nccl)
    listed = said.get("warnings")
    said["warnings"] = [str(w)[:SENT_CHARS] for w in listed[:SENT]] if isinstance(listed, list) else []
    net = said.get("net_warnings")
    net = [w for w in net if isinstance(w, dict)] if isinstance(net, list) else []
    before = said.pop("net_warnings_left_out", 0)
    known = isinstance(before, int) and not isinstance(before, bool) and 0 <= before < LEFT_OUT_MOST
    left = max(0, len(net) - SENT) + (before if known else 0)
    said["net_warnings"] = [sent(w) for w in net[:SENT]]
    if left:
        said["net_warnings_left_out"] = left
    return said


def sent(item: dict[str, Any]) -> dict[str, Any]:
    """One network WARN as the reader keeps it, each field of its kind."""
    line = item.get("line")
    return {
        "line": line if isinstance(line, int) and not isinstance(line, bool) and 0 < line < LEFT_OUT_MOST else None,
        "source": str(item.get("source") or "")[:SENT_CHARS],
        "text": str(item.get("text") or "")[:SENT_CHARS],
        "plugin": item.get("plugin") is True,
    }


def node_facts(nccl: dict[str, Any]) -> dict[str, Any]:
    """A node's captured log as the judges read a paste's facts: NCCL's, and the settings it printed."""
    settings = nccl.get("settings")
    pairs = list(settings.items())[:SETTINGS_MOST] if isinstance(settings, dict) else []
    return {"nccl": nccl, "system": {"env": {str(k)[:64]: str(v)[:256] for k, v in pairs}}}


def node_rows(name: str, nccl: dict[str, Any]) -> list[tuple[Warned, Row, str, Remediation]]:
    """One node's network WARNs judged: each with its row (named by the node, at most a warning), its quote and
    cure; a fallback its settings explain said with that cause and the cause's cure."""
    facts = node_facts(nccl)
    causes = network.causes(facts)
    explaining = next((c for c in causes if c.id in FALLBACK_CAUSES), None)
    found = []
    for w in warned(facts, causes):
        cause = explaining if w.explained else None
        said = f"{cause.summary} ({w.said()})" if cause else w.said()
        row = Row(Status.WARN, said, name=cause.id if cause else f"line {w.line}", node=name)
        found.append((w, row, f"{name}: {w.quote}", cause.remediation if cause else w.remediation))
    return found


def across_nodes(per_node: dict[str, dict[str, Any]]) -> Result | None:
    """Rank 0: the network WARNs each node's own NCCL log held (sockets.transports), judged as network.nccl judges a
    pasted log's (aspect "net-warnings"), failures first; None where no node's log held one."""
    judged = [j for name, t in sorted(per_node.items()) for j in node_rows(name, t.get("nccl") or {})]
    if not judged:
        return None
    judged.sort(key=lambda j: j[0].status != Status.FAIL)
    left = [
        f"{name}: {t['nccl']['net_warnings_left_out']} more network WARNs in its own log, not sent"
        for name, t in sorted(per_node.items())
        if (t.get("nccl") or {}).get("net_warnings_left_out")
    ]
    first = judged[0][1]
    return Result(
        Status.WARN,
        f"{first.node}: {first.summary}" + (f" (and {len(judged) - 1} more)" if len(judged) > 1 else ""),
        rows=[row for _, row, _, _ in judged],
        remediation=judged[0][3],
        quotes=[quote for _, _, quote, _ in judged],
        detail="; ".join(left) or None,
        aspect="net-warnings",
    )
