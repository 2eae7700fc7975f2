"""Every pattern a reader or a signature uses runs in linear time on input built from its own structure: for each
pattern, each literal run and a member of each character class it holds is repeated into a long line that
almost matches (the needle first, a byte no pattern expects last), and searched, at two lengths in one run. A
pattern that backtracks quadratically does K*K times the work on a line K times longer; a linear one, K times.
The work is CPU time (tests/helpers/growth.py): a busy machine changes neither."""

from __future__ import annotations

import importlib
import pkgutil
import re
from re import _constants as c
from re import _parser as parser

import pytest
from helpers.growth import LINEAR, REPEATS, K, growth

import gpudoctor.facts
import gpudoctor.paste
from gpudoctor.paste import nccl_tests, nvbandwidth, signatures
from gpudoctor.paste.found import Found

LENGTH = 20_000  # characters of filler in the longer line: a quadratic search is about 2e8 steps here (0.45 s)
SHORTER = LENGTH // K  # the shorter line: from it to LENGTH, linear work grows K times, quadratic K * K
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
    """Every compiled pattern at the top of a reader's module (gpudoctor.paste, gpudoctor.facts, and the packages
    under them: gpudoctor.paste.nvsmi)."""
    found = []
    for package in (gpudoctor.paste, gpudoctor.facts):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            loaded = importlib.import_module(module.name)
            short = module.name.removeprefix(f"{package.__name__}.")
            found += [(f"{short}.{name}", value) for name, value in vars(loaded).items() if _text(value)]
    return found


def _text(value: object) -> bool:
    return isinstance(value, re.Pattern) and isinstance(value.pattern, str)


def signature_patterns() -> list[tuple[str, re.Pattern[str], str]]:
    return [(s.id, s.pattern, s.needle) for s in signatures.table().values()]


def lines(lead: str, piece: str) -> tuple[str, str]:
    """The shorter and the longer line of `piece` repeated, as a paste's reader sees them (found.Found.of cuts runs
    of digits)."""
    short, long = (Found.of(lead + piece * (n // len(piece) + 1) + "\x00").text for n in (SHORTER, LENGTH))
    return short, long


def steepest(pattern: re.Pattern[str], lead: str, repeats: int = REPEATS) -> tuple[float, str]:
    """The largest growth of a search from the shorter line to the longer, over the lines of each piece of the
    pattern, and the piece."""
    worst = (0.0, "")
    for piece in sorted(pieces(pattern.pattern, pattern.flags & ~re.UNICODE)):
        worst = max(worst, (growth(pattern.search, *lines(lead, piece), repeats), piece))
    return worst


def test_the_pieces_of_a_pattern_are_its_literals_and_a_member_of_each_class() -> None:
    assert pieces(r"found version (?P<v>\d+) of [a-f]+|none") == {"found version ", "7", " of ", "a", "none"}
    assert pieces(r"(?:\s*\S+)*x") == {" ", "x"}


def test_a_quadratic_pattern_is_caught() -> None:
    """The test's own control: a pattern that scans to the end from every start position grows quadratically, one
    that does not, linearly."""
    quadratic, piece = steepest(re.compile(r"a*b"), "", repeats=2)  # up to 20,000 characters from each start
    linear, _ = steepest(re.compile(r"ab"), "")
    assert quadratic > LINEAR and piece == "a", quadratic
    assert linear < LINEAR, linear


@pytest.mark.parametrize("name, pattern", module_patterns(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_reader_pattern_is_linear_on_its_own_pieces(name: str, pattern: re.Pattern[str]) -> None:
    grew, piece = steepest(pattern, "")
    assert grew < LINEAR, f"{name}: {grew:.0f} times the work on {piece!r} x {K} times as long"


def test_every_signature_is_linear_on_its_own_pieces() -> None:
    steep = []
    for signature_id, pattern, needle in signature_patterns():
        grew, piece = steepest(pattern, needle + " ")
        if grew >= LINEAR:
            steep.append(f"{signature_id}: {grew:.0f} times the work on {piece!r} x {K} times as long")
    assert not steep, steep


def whole_text_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """The patterns searched over a paste's whole text (Found.matching), not one line at a time."""
    return [(name, pattern) for name, pattern in module_patterns() if pattern.flags & re.MULTILINE]


def many_lines(piece: str) -> tuple[Found, Found]:
    """Fewer and more lines, each one piece."""
    few, many = (Found.of("\n".join([piece] * (n // (len(piece) + 1)))) for n in (SHORTER, LENGTH))
    return few, many


def steepest_over_lines(pattern: re.Pattern[str]) -> tuple[float, str]:
    """The largest growth of Found.matching from fewer lines to more, each line one piece of the pattern, or blank
    (where a class that takes a newline would run on from every line's start)."""
    worst = (0.0, "")
    for piece in sorted(pieces(pattern.pattern, pattern.flags & ~re.UNICODE) | {"", " "}):
        worst = max(worst, (growth(lambda found: found.matching(pattern), *many_lines(piece)), piece))
    return worst


def test_a_pattern_that_runs_over_newlines_is_caught() -> None:
    """The control: from every blank line's start, a white-space class runs over all the blank lines after it."""
    few, many = (Found.of("\n" * n) for n in (SHORTER, LENGTH))
    assert growth(lambda found: found.matching(re.compile(r"^\s*x", re.MULTILINE)), few, many, repeats=2) > LINEAR
    assert growth(lambda found: found.matching(re.compile(r"^x", re.MULTILINE)), few, many) < LINEAR


@pytest.mark.parametrize("name, pattern", whole_text_patterns(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_whole_text_pattern_is_linear_over_many_lines(name: str, pattern: re.Pattern[str]) -> None:
    grew, piece = steepest_over_lines(pattern)
    assert grew < LINEAR, f"{name}: {grew:.0f} times the work on lines of {piece!r}, {K} times as many"


# Lines built from a whole match's start, not from one piece of it: a pattern's head and a long run after it that
# its unbounded repeat scanned to the end from every start (issue 47: each was quadratic, 80 KB in seconds).
# name -> (the pattern, a lead written once, the piece repeated)
JOINED = {
    "libcudnn-not-found: candidates never closed": (
        lambda: signatures.table()["libcudnn-not-found"].pattern,
        "libcudnn ",
        "Unable to load any of {libcudnn",
    ),
    "cuda-library-not-found: libtorch words": (
        lambda: signatures.table()["cuda-library-not-found"].pattern,
        "cannot open shared object file ",
        "libtorch_",
    ),
    "cuda-library-not-found: libc10 words": (
        lambda: signatures.table()["cuda-library-not-found"].pattern,
        "cannot open shared object file ",
        "libc10",
    ),
    "nccl_tests.TAKEN: row starts with no field after": (lambda: nccl_tests.TAKEN, "", "1[1]1[1]Ax"),
    "nccl_tests.DEVICE: a bracket never closed": (lambda: nccl_tests.DEVICE, "", "Rank 0 on x device 0 ["),
    "nvbandwidth.JSON_DEVICE: hosts never closed": (lambda: nvbandwidth.JSON_DEVICE, "0: ", "x: ("),
}


@pytest.mark.parametrize("name", JOINED)
def test_a_match_s_head_repeated_is_searched_in_linear_time(name: str) -> None:
    pattern, lead, piece = JOINED[name]
    grew = growth(pattern().search, *lines(lead, piece))
    assert grew < LINEAR, f"{name}: {grew:.0f} times the work on {K} times as long"
