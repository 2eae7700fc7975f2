"""A paste judged offline has every error line it read judged, whatever level the line's check runs at: a level
says what runs on a machine, not which of a paste's lines count. Before, an NCCL watchdog timeout (owned by
allreduce.bandwidth, a standard-level check) or a peer's exit (cluster.links) was read and then dropped: the report
said "skip" everywhere and exited 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import gpudoctor

from gpudoctor.context import Options
from gpudoctor.engine.planning import pasted_owners
from gpudoctor.engine.runner import select
from gpudoctor.paste.signatures import table
from gpudoctor.registry import discover

EVERY = discover([], entry_points=False).specs


def planned(signature_id: str, options: Options) -> set[str]:
    chosen = select(EVERY, options)
    facts = {"paste": {"signatures": [{"id": signature_id}]}}
    return {s.id for s in chosen + pasted_owners(EVERY, chosen, facts, options)}


@pytest.mark.parametrize("signature_id", sorted(table()))
def test_every_signatures_owner_is_in_the_offline_plan_of_a_paste_that_shows_it(signature_id: str) -> None:
    assert table()[signature_id].owner in planned(signature_id, Options(level="quick", offline=True))


def test_skip_and_only_still_rule() -> None:
    watchdog = "c10d-nccl-watchdog-timeout"
    assert "allreduce.bandwidth" not in planned(watchdog, Options(level="quick", skip=["allreduce.bandwidth"]))
    assert "allreduce.bandwidth" not in planned(watchdog, Options(level="quick", skip=["allreduce"]))
    assert planned(watchdog, Options(level="quick", only=["driver.nvml"])) == {"driver.nvml"}


# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp's watchdog, and the DistBackendError of ncclRemoteError (NCCL's
# src/include/nccl.h: "remote process exited or there was a network error"), as torch prints them.
LINES = {
    "allreduce.bandwidth": (
        "[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5123, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800591 milliseconds before timing out.\n"
    ),
    "cluster.links": (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "remote process exited or there was a network error, NCCL version 2.21.5\n"
    ),
}


@pytest.mark.parametrize("owner", sorted(LINES))
def test_a_line_owned_by_a_check_above_the_quick_level_is_reported_not_dropped(tmp_path: Path, owner: str) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_text(LINES[owner])
    done = gpudoctor("check", "--from", str(paste), "--json")
    document = json.loads(done.stdout)
    statuses = {c["check_id"]: c["status"] for c in document["checks"]}
    assert statuses.get(owner) == "warn", statuses
    assert document["status"] == "warn"
