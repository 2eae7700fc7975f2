"""Core pieces on their own: check declaration, selection, exit codes, fault-spec parsing."""

from __future__ import annotations

import pytest

from gpudoctor.command import command
from gpudoctor.context import Options
from gpudoctor.engine.runner import SelectionError, select
from gpudoctor.model import Result, Row, Status, from_rows
from gpudoctor.registry import check, discover
from gpudoctor.report.document import overall_status
from gpudoctor.report.exits import exit_code
from gpudoctor.workloads.launch import Fault, FaultSpecError


@pytest.mark.parametrize("bad", ["nodot", "Area.name", "area.Name", "area.na_me", ".name", "area."])
def test_check_ids_are_area_dot_kebab_name(bad: str) -> None:
    with pytest.raises(ValueError, match=r"area\.name"):
        check(bad, "t")


def test_level_and_needs_are_validated() -> None:
    with pytest.raises(ValueError, match="level"):
        check("a.b", "t", level="slow")
    with pytest.raises(ValueError, match="needs"):
        check("a.b", "t", needs=("tpu",))


def test_selection_orders_quick_first_and_only_ignores_level() -> None:
    specs = discover(entry_points=False).specs
    standard = select(specs, Options(level="standard"))
    levels = [s.level for s in standard]
    assert levels == sorted(levels, key=("quick", "standard", "full").index)
    assert [s.id for s in select(specs, Options(only=["ddp"]))] == ["ddp.train"]
    with pytest.raises(SelectionError, match="did you mean"):
        select(specs, Options(only=["healt"]))


def test_exit_codes() -> None:
    warn = [Result(Status.WARN, "w")]
    assert exit_code(warn, strict=False, interrupted=False) == 0
    assert exit_code(warn, strict=True, interrupted=False) == 1
    assert exit_code([Result(Status.TIMEOUT, "t")], strict=False, interrupted=False) == 1
    assert exit_code(warn, strict=False, interrupted=True) == 130
    assert overall_status([Result(Status.SKIP, "s")]).value == "skip"


def test_rows_summary_names_bad_gpus_and_fills_commands() -> None:
    from gpudoctor.model import Remediation

    rows = [Row(Status.PASS, "ok", index=0), Row(Status.FAIL, "broken", index=1), Row(Status.WARN, "meh", index=2)]
    result = from_rows(rows, "fine", Remediation("why", [command("fix -i {gpu}")]))
    assert result.status == Status.FAIL
    assert result.summary == "GPU 1: broken; GPU 2: meh"
    assert result.remediation.commands == ["fix -i 1,2"]


@pytest.mark.parametrize("text", ["rank=1", "rank=x,kind=hang", "rank=1,kind=explode", "rank=1,kind=hang,when=now"])
def test_fault_spec_errors(text: str) -> None:
    with pytest.raises(FaultSpecError):
        Fault.parse(text)


def test_fault_spec_parses() -> None:
    assert Fault.parse("rank=2,kind=crash,at=train step 3") == Fault(2, "crash", "train step 3")


def test_the_console_names_what_tells_a_figure_from_its_siblings() -> None:
    """A cluster.links result carries thousands of `link_gbps` figures: each line says which transfer."""
    from gpudoctor.model import Metric
    from gpudoctor.report.console import format_metric

    metric = Metric("link_gbps", 9.686, "GB/s", labels={"src": "node0001", "dst": "node0002", "stage": "first"})
    assert format_metric(metric) == "link_gbps{src=node0001,dst=node0002,stage=first}: 9.686 GB/s"
    assert format_metric(Metric("shm", 256.0, "GiB", expected=">= 1.0")) == "shm: 256 GiB (expected >= 1.0 GiB)"
