"""`python -m gpudoctor.judging.tables`: the torch table refreshed from what the registry serves (PyPI's JSON API,
real documents saved in tests/fixtures/pypi), and the [[build]] row of the installed torch."""

from __future__ import annotations

import copy
from pathlib import Path

from helpers.common import FIXTURES

from gpudoctor.judging import compat, tables
from gpudoctor.judging.hardware import tomllib

PYPI = FIXTURES / "pypi"


def table_before(release: str) -> dict:
    """The torch table as it was before this release was added."""
    table = copy.deepcopy(compat.torch_table())
    table["release"] = [r for r in table["release"] if compat.version(r["torch"]) < compat.version(release)]
    table["newest_torch"] = table["release"][-1]["torch"]
    return table


def test_a_release_the_table_lacks_gets_a_row_from_the_registry() -> None:
    torch_json, vision_json = tables.fetch("torch", PYPI), tables.fetch("torchvision", PYPI)
    table = table_before("2.15.0")
    assert tables.missing_releases(torch_json, table) == ["2.15.0"]
    row = tables.release_row("2.15.0", torch_json, vision_json, table)
    parsed = tomllib.loads(row)["release"][0]
    assert parsed["torch"] == "2.15.0" and parsed["date"] == "2026-10-28"
    assert parsed["pypi_default"] == "cu132"  # its wheel pins cuda-toolkit==13.2.2
    assert "pins CUDA toolkit 13.2.2" in row
    assert set(parsed) >= {"linux_x86_64", "linux_aarch64", "windows", "install"}
    assert "torchvision" not in parsed  # 0.29.2 declares torch>=2.14.0: built for 2.14, not for 2.15
    assert tables.missing_releases(torch_json, compat.torch_table()) == []


def test_a_torchvision_is_paired_only_where_it_declares_this_release_and_not_the_one_before() -> None:
    vision = {"info": {"version": "0.30.0", "requires_dist": ["numpy", "torch==2.15.0"]}}
    assert tables.declaring_torchvision(vision, "2.15.0", "2.14.1") == "0.30.0"
    vision["info"]["requires_dist"] = ["torch>=2.14.0"]
    assert tables.declaring_torchvision(vision, "2.15.0", "2.14.1") is None


def test_writing_moves_newest_torch_and_appends_the_rows(tmp_path: Path) -> None:
    target = tmp_path / "torch.toml"
    target.write_text('newest_torch = "2.14.1"\n')
    tables.write(['\n[[release]]\ntorch = "2.15.0"\n'], "2.15.0", target)
    assert tomllib.loads(target.read_text()) == {"newest_torch": "2.15.0", "release": [{"torch": "2.15.0"}]}


def test_the_tool_reads_saved_documents_and_says_one_line_when_it_cannot(capsys) -> None:
    assert tables.main(["--from", str(PYPI)]) == 0
    assert "torch.toml knows up to 2.15.0; PyPI adds nothing" in capsys.readouterr().err
    assert tables.main(["--from", str(PYPI / "missing")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("gpudoctor.judging.tables: cannot read ") and error.count("\n") == 1


def test_the_installed_torch_gives_its_build_row() -> None:
    """Asked of the torch in this environment (a CUDA build that runs on the CPU here)."""
    row = tomllib.loads(tables.installed_row())["build"][0]
    import torch

    assert row["tag"] == compat.variant_of({"version": torch.__version__, "cuda": torch.version.cuda})
    assert row["linux_x86_64"] == sorted(torch.cuda.get_arch_list(), key=tables._arch_key)
