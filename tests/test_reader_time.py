"""Every pattern a reader or a signature uses runs in linear time on input built from its own structure: for each
pattern, each literal run and a member of each character class it holds is repeated into a long line that
almost matches (the needle first, a byte no pattern expects last), and searched. A pattern that backtracks
quadratically takes seconds on such a line; a linear one, a millisecond."""

from __future__ import annotations

import importlib
import pkgutil
import re
import time
from re import _constants as c
from re import _parser as parser

import pytest

import gpudoctor.facts
import gpudoctor.paste
from gpudoctor.paste import signatures
from gpudoctor.paste.found import Found

LENGTH = 20_000  # characters of filler: a quadratic search is about 2e8 steps here (0.45 s), a linear one 2e4
LIMIT_S = 0.25  # per search; a linear pattern takes a millisecond or two on this machine, loaded or not
CLASS_SAMPLE = {c.CATEGORY_DIGIT: "7", c.CATEGORY_SPACE: " ", c.CATEGORY_WORD: "w", c.CATEGORY_NOT_SPACE: "x"}


def pieces(pattern: str, flags: int = 0) -> set[str]:
    """The literal runs of a pattern and one member of each character class in it: what its matches are made of."""
    found: set[str] = set()
    run: list[str] = []

    def flush() -> None:
        if run:
            found.add("".join(run))
            run.clear()

    def walk(parsed: object) -> None:
        for op, arg in parsed:  # type: ignore[attr-defined]
            if op is c.LITERAL:
                run.append(chr(arg))
                continue
            flush()
            if op is c.IN:
                found.update(_member(item) for item in arg)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                walk(arg[2])
            elif op is c.SUBPATTERN:
                walk(arg[-1])
            elif op is c.BRANCH:
                for branch in arg[1]:
                    walk(branch)
                    flush()
            elif op in (c.ASSERT, c.ASSERT_NOT, c.ATOMIC_GROUP):
                walk(arg[-1] if op is not c.ATOMIC_GROUP else arg)
            elif op is c.ANY:
                found.add("x")
        flush()

    walk(parser.parse(pattern, flags))
    return {piece for piece in found if piece}


def _member(item: tuple) -> str:
    op, arg = item
    if op is c.LITERAL:
        return chr(arg)
    if op is c.RANGE:
        return chr(arg[0])
    if op is c.CATEGORY:
        return CLASS_SAMPLE.get(arg, "x")
    return "x"


def module_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Every compiled pattern at the top of a reader's module (gpudoctor.paste, gpudoctor.facts)."""
    found = []
    for package in (gpudoctor.paste, gpudoctor.facts):
        for module in pkgutil.iter_modules(package.__path__):
            loaded = importlib.import_module(f"{package.__name__}.{module.name}")
            found += [(f"{module.name}.{name}", value) for name, value in vars(loaded).items() if _text(value)]
    return found


def _text(value: object) -> bool:
    return isinstance(value, re.Pattern) and isinstance(value.pattern, str)


def signature_patterns() -> list[tuple[str, re.Pattern[str], str]]:
    return [(s.id, s.pattern, s.needle) for s in signatures.table().values()]


def slowest(pattern: re.Pattern[str], lead: str) -> tuple[float, str]:
    """The longest search over lines built from each piece of the pattern, as a paste's reader sees them
    (found.Found.of cuts runs of digits), and the piece."""
    worst = (0.0, "")
    for piece in sorted(pieces(pattern.pattern, pattern.flags & ~re.UNICODE)):
        line = Found.of(lead + piece * (LENGTH // len(piece) + 1) + "\x00").text
        started = time.perf_counter()
        pattern.search(line)
        took = time.perf_counter() - started
        worst = max(worst, (took, piece))
    return worst


def test_the_pieces_of_a_pattern_are_its_literals_and_a_member_of_each_class() -> None:
    assert pieces(r"found version (?P<v>\d+) of [a-f]+|none") == {"found version ", "7", " of ", "a", "none"}
    assert pieces(r"(?:\s*\S+)*x") == {" ", "x"}


def test_a_quadratic_pattern_is_caught() -> None:
    """The test's own control: a pattern that scans to the end from every start position takes many times what a
    linear one takes on the same line, and past the limit."""
    took, piece = slowest(re.compile(r"a*b"), "")  # 20,000 scans of up to 20,000 characters
    linear, _ = slowest(re.compile(r"ab"), "")
    assert took > 20 * linear and piece == "a"
    assert took > LIMIT_S, "LENGTH too short for the limit to catch a quadratic pattern on this machine"


@pytest.mark.parametrize("name, pattern", module_patterns(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_reader_pattern_is_linear_on_its_own_pieces(name: str, pattern: re.Pattern[str]) -> None:
    took, piece = slowest(pattern, "")
    assert took < LIMIT_S, f"{name}: {took:.2f} s on {piece!r} x {LENGTH // len(piece)}"


def test_every_signature_is_linear_on_its_own_pieces() -> None:
    slow = []
    for signature_id, pattern, needle in signature_patterns():
        took, piece = slowest(pattern, needle + " ")
        if took >= LIMIT_S:
            slow.append(f"{signature_id}: {took:.2f} s on {piece!r}")
    assert not slow, slow


def whole_text_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """The patterns searched over a paste's whole text (Found.matching), not one line at a time."""
    return [(name, pattern) for name, pattern in module_patterns() if pattern.flags & re.MULTILINE]


def slowest_over_lines(pattern: re.Pattern[str]) -> tuple[float, str]:
    """The longest Found.matching over many lines, each one piece of the pattern, or blank (where a class that
    takes a newline would run on from every line's start)."""
    worst = (0.0, "")
    for piece in sorted(pieces(pattern.pattern, pattern.flags & ~re.UNICODE) | {"", " "}):
        found = Found.of("\n".join([piece] * (LENGTH // (len(piece) + 1))))
        started = time.perf_counter()
        found.matching(pattern)
        worst = max(worst, (time.perf_counter() - started, piece))
    return worst


def test_a_pattern_that_runs_over_newlines_is_caught() -> None:
    """The control: from every blank line's start, a white-space class runs over all the blank lines after it."""
    found = Found.of("\n" * LENGTH)
    started = time.perf_counter()
    found.matching(re.compile(r"^\s*x", re.MULTILINE))
    assert time.perf_counter() - started > LIMIT_S


@pytest.mark.parametrize("name, pattern", whole_text_patterns(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_whole_text_pattern_is_linear_over_many_lines(name: str, pattern: re.Pattern[str]) -> None:
    took, piece = slowest_over_lines(pattern)
    assert took < LIMIT_S, f"{name}: {took:.2f} s on lines of {piece!r}"
