"""The corpus of real pastes (tests/fixtures/corpus) is complete and stays independent of gpudoctor's rules.

Every case has its paste, its thread's facts and a label; every label's cause family is in MAPPING.toml, whose
ids are ids gpudoctor has; SEALED.md lists the newest third by opening date and only ids that exist; and no
signature, code or rule source in gpudoctor/data cites a corpus thread (rules cite where the code or the message
comes from, never the thread used to measure them).
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
DATA = ROOT / "gpudoctor" / "data"
FIELDS = ("source", "site", "opened", "title", "reporter", "confirmed_fix", "confirmed_by", "partial")
LABEL = ("kind", "cause", "fix", "fix_match")
THREAD = re.compile(r"^https://github\.com/([\w.-]+)/([\w.-]+)/(?:issues|pull|discussions)/(\d+)$")


def folders() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_dir())


def case(folder: Path) -> dict:
    return tomllib.loads((folder / "case.toml").read_text(encoding="utf-8"))


def sealed() -> list[str]:
    listed = (CORPUS / "SEALED.md").read_text(encoding="utf-8").split("## Sealed ids", 1)[1]
    return re.findall(r"^- (\S+)\s*$", listed, re.M)


def test_the_corpus_has_at_least_150_cases() -> None:
    assert len(folders()) >= 150


@pytest.mark.parametrize("folder", folders(), ids=lambda p: p.name)
def test_every_case_has_its_paste_facts_and_label(folder: Path) -> None:
    assert (folder / "paste.txt").read_text(encoding="utf-8").strip(), "empty paste"
    data = case(folder)
    missing = [k for k in FIELDS if k not in data] + [f"label.{k}" for k in LABEL if k not in data.get("label", {})]
    assert not missing, missing
    assert THREAD.match(data["source"]), data["source"]
    owner, repo, _ = THREAD.match(data["source"]).groups()
    assert data["site"] == f"github:{owner}/{repo}"
    date.fromisoformat(data["opened"])
    assert isinstance(data["partial"], bool)
    label = data["label"]
    assert label["kind"] in ("machine", "program", "healthy")
    assert label["cause"] and label["fix"]
    for pattern in label["fix_match"]:
        re.compile(pattern, re.I)
    assert label["fix_match"] or label["kind"] == "healthy", "only healthy cases may have nothing to match"


def test_each_thread_appears_once() -> None:
    sources = [case(f)["source"].lower() for f in folders()]
    assert len(sources) == len(set(sources))


def test_every_cause_family_is_mapped_to_ids_gpudoctor_has() -> None:
    mapping = tomllib.loads((CORPUS / "MAPPING.toml").read_text(encoding="utf-8"))
    families = mapping["family"]
    assert not {case(f)["label"]["cause"] for f in folders()} - set(families)
    signatures = {
        s["id"]
        for path in (DATA / "signatures").glob("*.toml")
        for s in tomllib.loads(path.read_text(encoding="utf-8")).get("signature", [])
    }
    sources = "\n".join(
        p.read_text(encoding="utf-8") for folder in ("gpudoctor", "checks") for p in (ROOT / folder).rglob("*.py")
    )
    for name, entry in families.items():
        assert set(entry) <= {"causes", "also_leading", "signatures", "checks"}, name
        aspects = {s for s in entry.get("signatures", []) if f'aspect = "{s}"' in sources or f'aspect="{s}"' in sources}
        assert not set(entry.get("signatures", [])) - signatures - aspects, name
        for cause in entry.get("causes", []) + entry.get("also_leading", []):
            assert f'"{cause}"' in sources, (name, cause)
        for check in entry.get("checks", []):
            assert f'"{check}"' in sources, (name, check)


def test_the_sealed_part_is_the_newest_third_and_its_ids_exist() -> None:
    ids = sealed()
    names = {f.name for f in folders()}
    assert ids and len(ids) == len(set(ids))
    assert not set(ids) - names
    opened = {f.name: case(f)["opened"] for f in folders()}
    assert len(ids) == len(names) // 3
    assert min(opened[i] for i in ids) > max(opened[n] for n in names - set(ids))


def test_no_gpudoctor_data_source_cites_a_corpus_thread() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in DATA.rglob("*") if p.suffix in (".toml", ".json"))
    cited = []
    for folder in folders():
        owner, repo, number = THREAD.match(case(folder)["source"]).groups()
        forms = (
            rf"(?<![\w.-]){re.escape(repo)}#{number}(?!\d)",
            rf"github\.com/{re.escape(owner)}/{re.escape(repo)}/(?:issues|pull|discussions)/{number}(?!\d)",
        )
        if any(re.search(form, text, re.I) for form in forms):
            cited.append(folder.name)
    assert not cited, cited
