"""gpudoctor.api keeps one list of its names (the imports a type checker reads): every name in it loads as
`from its_module import name` would, docs/PLUGINS.md lists each, and the built-in checks take from the API what
it offers instead of reaching past it into the module behind."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from helpers.common import ROOT

from gpudoctor import api

CHECK_MODULES = sorted(p for p in (ROOT / "checks").glob("*.py") if p.name != "__init__.py")
TABLE_ROW = re.compile(r"^\| `(\w+)` \| `([\w.]+)` \|$", re.MULTILINE)


def _expected(name: str) -> object:
    provider = importlib.import_module(api.PROVIDERS[name])
    return getattr(provider, name, None) or importlib.import_module(f"{api.PROVIDERS[name]}.{name}")


@pytest.mark.parametrize("name", api.__all__)
def test_every_api_name_is_what_its_import_names(name: str) -> None:
    assert getattr(api, name) is _expected(name)


def test_a_name_imported_under_type_checking_joins_the_api_and_nothing_else_is_needed(tmp_path: Path) -> None:
    """One list: a copy of api.py with one import more offers that name, in __all__ and loaded on demand."""
    source = Path(api.__file__).read_text()
    block = "if TYPE_CHECKING:\n"
    copy = tmp_path / "api_copy.py"
    copy.write_text(source.replace(block, block + "    from gpudoctor.words import KINDS\n", 1))
    spec = importlib.util.spec_from_file_location("api_copy", copy)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.__all__) == {*api.__all__, "KINDS"} and module.PROVIDERS["KINDS"] == "gpudoctor.words"
    assert module.KINDS is importlib.import_module("gpudoctor.words").KINDS


def test_plugins_doc_lists_every_api_name_with_its_module() -> None:
    listed = dict(TABLE_ROW.findall((ROOT / "docs" / "PLUGINS.md").read_text()))
    assert listed == api.PROVIDERS


def _bypasses(path: Path) -> list[str]:
    """Imports in a check module of what the API offers, taken from the module behind it: a name the API
    re-exports (`from gpudoctor.judging.hardware import gpu_model`) or a module it offers (`from
    gpudoctor.judging import expect`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("gpudoctor.") or node.level:
            continue
        if node.module == "gpudoctor.api":
            continue
        found += [f"{node.module}.{a.name}" for a in node.names if api.PROVIDERS.get(a.name) == node.module]
    return found


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: p.name)
def test_checks_take_from_the_api_what_it_offers(path: Path) -> None:
    assert _bypasses(path) == [], f"{path.name}: import these from gpudoctor.api"


def test_a_bypass_is_seen(tmp_path: Path) -> None:
    module = tmp_path / "bypass.py"
    module.write_text("from gpudoctor.judging import expect, sdc\nfrom gpudoctor.judging.hardware import gpu_model\n")
    assert _bypasses(module) == ["gpudoctor.judging.expect", "gpudoctor.judging.hardware.gpu_model"]


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: p.name)
def test_what_a_check_imports_from_the_api_is_in_its_list(path: Path) -> None:
    names = [
        a.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "gpudoctor.api"
        for a in node.names
    ]
    assert set(names) <= set(api.__all__), sorted(set(names) - set(api.__all__))
