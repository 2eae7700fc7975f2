"""In p2p.access's isolated process: every ordered pair of GPUs, peer access, copies timed and verified."""

from __future__ import annotations

from typing import Any

import torch

from gpudoctor.api import measure, progress


def measure_pairs(params: dict[str, Any]) -> dict[str, Any]:
    """In the isolated child: for each ordered GPU pair, peer access, copy bandwidth, latency, verification."""
    count = measure.cuda_devices()
    pairs = []
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            progress("p2p", f"GPU {a} -> GPU {b}")
            pairs.append(
                {"src": a, "dst": b, "access": torch.cuda.can_device_access_peer(a, b), **copy_pair(a, b, params)}
            )
    return {"pairs": pairs}


def copy_pair(a: int, b: int, params: dict[str, Any]) -> dict[str, Any]:
    """Copies from cuda:`a` to cuda:`b`, large (bandwidth) and one word (latency): the destination cleared
    before every copy and every copy's data checked against the source, outside the timed region."""
    numel = params["bytes"] // 4
    src = torch.randn(numel, device=f"cuda:{a}")
    dst = torch.empty(numel, device=f"cuda:{b}")

    def copies(s: Any, d: Any) -> Any:
        want = measure.checksum(s)
        return measure.checked_repeats(
            lambda: d.copy_(s),
            torch.device("cuda", a),
            params["warmup"],
            params["iters"],
            clear=lambda: d.fill_(float("nan")),
            verify=lambda: measure.checksum(d) == want,
        )

    large, tiny = copies(src, dst), copies(src[:1], dst[:1])
    torch.cuda.synchronize(b)
    wrong = large.wrong + tiny.wrong
    return {
        "gbps": params["bytes"] / measure.summary(large.times)["median_s"] / 1e9,
        "latency_us": measure.summary(tiny.times)["median_s"] * 1e6,
        "verified": wrong == 0,
        "copies_checked": large.checked + tiny.checked,
        "copies_wrong": wrong,
    }
