"""What `gpudoctor list` shows of the checks, read without the registry's machinery for running them.

The built-in checks' declarations come from the package's index of them (data/declarations.tsv, written by
`python -m gpudoctor.docgen`, kept current by a test) where it was made from the declarations the sources hold
now, else from the sources themselves (`read_declarations`; a module not written in literals is imported). It also
holds what a declaration may say (levels, needs, id and cure words), which the registry checks. It imports no
registry: the command line imports it, with its check specs and plugin loading, only where a plugin may add checks
to the list (`plugins_possible`).
"""

from __future__ import annotations

import ast
import binascii
import functools
import os
import pkgutil
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.facts.sources import SOURCES
from gpudoctor.text import harmless

ENTRY_POINT_GROUP = "gpudoctor.checks"
CHECKS_DIR_ENV = "GPUDOCTOR_CHECKS_DIR"
SPEC_ATTR = "__gpudoctor_check__"
LEVELS = ("quick", "standard", "full")
DEFAULT_LEVEL = LEVELS[0]
TITLE_CHARS, DOC_CHARS = 120, 400  # a check's title and description, as `list` and the console show them
# A check that names no fact source is given all of them (a plugin written before they existed).
NEEDS = (*SOURCES, "gpu", "live", "cluster", "benchmarks")


@dataclass(frozen=True)
class Declared:
    """A check as `gpudoctor list` shows it: what its declaration says."""

    id: str
    level: str
    description: str
    source: str = "builtin"
    cure: str = ""  # the cure its declaration names for a pasted error of its cause (paste/cures.py)


@dataclass
class Listing:
    """Every check's declaration, and every plugin that could not be loaded (as `Discovery` has them)."""

    declared: list[Declared] = field(default_factory=list)
    broken: list[tuple[str, str]] = field(default_factory=list)


def plugins_possible(checks_dirs: Iterable[str | Path] = ()) -> bool:
    """Whether a plugin may add checks to the list: a checks directory is given (here or in CHECKS_DIR_ENV) or an
    installed distribution may declare one (then registry.listing imports them as a run does)."""
    return bool(list(checks_dirs)) or bool(os.environ.get(CHECKS_DIR_ENV)) or may_declare_plugins()


def builtin_modules() -> list[str]:
    """The built-in check modules, found by walking the package, in the order the package gives its areas
    (gpudoctor.checks.ORDER; a module it does not name comes last): the registry names none of them."""
    import gpudoctor.checks

    order = list(gpudoctor.checks.ORDER)
    names = sorted(m.name for m in pkgutil.iter_modules(gpudoctor.checks.__path__))
    return sorted(names, key=lambda name: order.index(name) if name in order else len(order))


@functools.cache
def builtin_declarations() -> tuple[Declared, ...]:
    """Every built-in check's declaration: the index's where it was made from these very declarations, else read
    from each module's source (a module whose declarations cannot be read from it is imported)."""
    texts = module_texts()
    indexed = _indexed(texts)
    return indexed if indexed is not None else tuple(read_declarations(texts))


def cures() -> dict[str, str]:
    """The cure each built-in check's declaration names, by check id (those that name one): what a pasted error
    of a cause it owns gets (paste/cures.py), found without importing a check module."""
    return {d.id: d.cure for d in builtin_declarations() if d.cure}


# The index: a first line with the digest of the declarations' own text it was made from, then a declaration a
# line, its fields (id, level, description, source, cure) between tabs.
INDEX = Path(__file__).resolve().parent / "data" / "declarations.tsv"
INDEX_HEADER = "# made by `python -m gpudoctor.docgen` from the check declarations; do not edit. digest "
FIELDS = ("id", "level", "description", "source", "cure")


def _digest(texts: dict[str, list[str] | None]) -> str | None:
    """A CRC-32 of every module's declaration texts, in order (a cache key, not a defence: the index is package
    data, as trusted as the code beside it); None where a module's declarations cannot be read as text."""
    if any(parts is None for parts in texts.values()):
        return None
    joined = "\0".join(f"{name}\n" + "\n".join(parts or []) for name, parts in texts.items())
    return f"{binascii.crc32(joined.encode()):08x}"


def _indexed(texts: dict[str, list[str] | None]) -> tuple[Declared, ...] | None:
    digest = _digest(texts)
    try:
        header, *rows = INDEX.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return None
    if digest is None or header != INDEX_HEADER + digest:
        return None
    declared = [row.split("\t") for row in rows]
    return tuple(Declared(*fields) for fields in declared) if all(len(f) == len(FIELDS) for f in declared) else None


def index_text() -> str:
    """The index as data/declarations.tsv holds it, made from the built-in modules' sources now."""
    texts = module_texts()
    rows = [[getattr(d, name) for name in FIELDS] for d in read_declarations(texts)]
    if any("\t" in cell or "\n" in cell for row in rows for cell in row):
        raise ValueError("a declaration's field holds a tab or a line break: the index cannot hold it")
    return "\n".join([INDEX_HEADER + str(_digest(texts)), *("\t".join(row) for row in rows)]) + "\n"


def module_texts() -> dict[str, list[str] | None]:
    """Each built-in module's declaration texts, by module name, its source read where the package's folder
    holds it (as pip installs it; a finder's lookup per module costs more than the read), else through its
    loader."""
    import gpudoctor.checks

    folder = Path(gpudoctor.checks.__path__[0])
    texts = {}
    for name in builtin_modules():
        file = folder / f"{name}.py"
        source = file.read_text(encoding="utf-8") if file.is_file() else _source(f"gpudoctor.checks.{name}")
        texts[name] = declaration_texts(source)
    return texts


def _source(module: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec(module)
    assert spec and spec.loader
    return spec.loader.get_source(module) or ""  # type: ignore[attr-defined]


# A declaration as the built-in modules write it: `@check(` at a line's start, the `def` below it, its
# signature ending a line with `:`, then its docstring, if any. This much of the source is parsed, not all.
DECLARATION = re.compile(r"^@check\(", re.M)
DEFINITION = re.compile(r"^(?:async[ \t]+)?def[ \t]", re.M)
LINE_END_COLON = re.compile(r":[ \t]*\n")
DOCSTRING = re.compile(r"[ \t]*[rRuU]?(\"\"\"|\'\'\')")


def declaration_texts(source: str) -> list[str] | None:
    """Each declaration of a module's source as a statement of its own (`@check(...)`, the `def` below it and its
    docstring), or None where one does not end as the built-in modules write them."""
    found = []
    for start in DECLARATION.finditer(source):
        definition = DEFINITION.search(source, start.end())
        signature = LINE_END_COLON.search(source, definition.end()) if definition else None
        if signature is None:
            return None
        opening = DOCSTRING.match(source, signature.end())
        closing = source.find(opening[1], opening.end()) + len(opening[1]) if opening else signature.end()
        if closing < signature.end():
            return None
        found.append(source[start.start() : closing] + ("" if opening else " ..."))
    return found


# Where importlib.metadata finds the installed distributions (its MetadataPathFinder, Python 3.11's
# Lib/importlib/metadata/__init__.py, FastPath and Prepared): a folder named `*.dist-info` or `*.egg-info` in
# a folder on sys.path ('' is the current one), its entry points in `entry_points.txt`.
METADATA_SUFFIXES = (".dist-info", ".egg-info")


def may_declare_plugins() -> bool:
    """Whether an installed distribution may declare an entry point of ENTRY_POINT_GROUP, read without importing
    importlib.metadata (it costs `list` more than all the rest): yes where one's entry_points.txt names the group,
    and wherever distributions may be found otherwise (a zip file on sys.path, another finder of them)."""
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return True
    return any(_declares_plugins(entry or ".") for entry in sys.path)


def _declares_plugins(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except NotADirectoryError:
        return True  # a zip file of modules may hold distributions too
    except OSError:
        return False
    for name in names:
        if name.lower().endswith(METADATA_SUFFIXES):
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8", errors="replace") as text:
                    if ENTRY_POINT_GROUP in text.read():
                        return True
            except OSError:
                continue
    return False


# A sentence ends at a full stop before a space or the end, not in "e.g. " or "i.e. ".
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)")


def first_sentence(doc: str, limit: int = DOC_CHARS) -> str:
    """A docstring's first sentence, as `list` shows it: its first paragraph's lines joined, up to the first
    sentence end or the paragraph's end, so a sentence that runs over lines is never cut mid-way. One longer
    than `limit` is cut at a word, with `...`."""
    paragraph = " ".join(re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0].split())
    end = SENTENCE_END.search(paragraph)
    sentence = harmless(paragraph[: end.end()] if end else paragraph)
    if len(sentence) <= limit:
        return sentence
    return sentence[: limit - 3].rsplit(" ", 1)[0] + "..."


def title_line(check_id: str, title: Any) -> str:
    """A declared title as `list` and the console show it: its first line, without control characters."""
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"check {check_id}: its title is {title!r}, not a line of text")
    return harmless(title.strip().splitlines()[0])[:TITLE_CHARS]


def validate(check_id: str, level: str, needs: tuple[str, ...], cure: str = "") -> None:
    area, _, name = check_id.partition(".")
    if not area or not name or not all(_kebab(p) for p in (area, name)):
        raise ValueError(f"check id {check_id!r} is not of the form area.name in kebab-case words")
    if level not in LEVELS:
        raise ValueError(f"check {check_id}: level {level!r} is not one of {', '.join(LEVELS)}")
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"check {check_id}: unknown needs {sorted(unknown)}")
    if cure and not (isinstance(cure, str) and _kebab(cure)):
        raise ValueError(f"check {check_id}: cure {cure!r} is not a name in kebab-case words")


def _kebab(word: str) -> bool:
    return all((part.isalnum() and part.islower()) or (part.isascii() and part.isdigit()) for part in word.split("-"))


def read_declarations(texts: dict[str, list[str] | None]) -> list[Declared]:
    """The built-in declarations parsed from their texts (`module_texts`), each module's in turn; a module whose
    declarations cannot be read so is imported, and what its checks declared is read from them."""
    found: list[Declared] = []
    for name, parts in texts.items():
        read = None if parts is None else _parsed(parts)
        found += read if read is not None else imported(f"gpudoctor.checks.{name}")
    return found


def imported(module: str) -> list[Declared]:
    """What the checks of a module declare, from the specs its import attached to them (registry.check)."""
    import importlib

    specs = [getattr(value, SPEC_ATTR, None) for value in vars(importlib.import_module(module)).values()]
    return [Declared(s.id, s.level, s.description, "builtin", s.cure) for s in specs if s is not None]


def declared_in(source: str) -> list[Declared] | None:
    """The checks a built-in module's source declares, read as `check` would declare them (the same title,
    level and description, checked the same way), or None where one is not written out in literals."""
    texts = declaration_texts(source)
    return None if texts is None else _parsed(texts)


def _parsed(texts: list[str]) -> list[Declared] | None:
    found = []
    for text in texts:
        try:
            declared = _declared_by(ast.parse(text).body[0])
        except SyntaxError:
            return None
        if declared is None:
            return None
        found.append(declared)
    return found


def _declared_by(function: ast.stmt) -> Declared | None:
    """What `@check(...)` above `function` declares, where its id, title and level are literals."""
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    calls = [d for d in function.decorator_list if isinstance(d, ast.Call)]
    call = next((c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "check"), None)
    if call is None:
        return None
    given = dict(zip(("id", "title", "level"), call.args, strict=False))
    given |= {k.arg: k.value for k in call.keywords if k.arg}
    try:
        check_id, title = ast.literal_eval(given["id"]), ast.literal_eval(given["title"])
        level = ast.literal_eval(given["level"]) if "level" in given else DEFAULT_LEVEL
        cure = ast.literal_eval(given["cure"]) if "cure" in given else ""
    except (KeyError, ValueError, TypeError, SyntaxError):
        return None
    validate(check_id, level, (), cure)
    title = title_line(check_id, title)
    description = first_sentence(ast.get_docstring(function, clean=False) or title)
    return Declared(check_id, level, description, cure=cure)
