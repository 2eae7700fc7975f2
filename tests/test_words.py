"""Words that cannot be options: no kind of value a command holds begins with a dash (a script gets "./" instead),
and digits are ASCII digits wherever a kind counts them."""

from __future__ import annotations

import json

import bashlex
import pytest
from helpers.common import gpudoctor

from gpudoctor.words import KINDS, RELATIVE, Unsafe, word

# A value each kind takes: the test makes its hostile variants from it.
GOOD = {
    "version": "12.4",
    "release": "2.15.0",
    "variant": "cu126",
    "number": "42",
    "interface": "eth0",
    "variable": "NCCL_IB_DISABLE",
    "node": "gpu-node-01",
    "word": "libcudnn.so.9",
    "script": "train.py",
    "gpus": "0,3",
    "numbers": "12,34",
    "nodes": "node-a,node-b",
}
UNICODE_DIGITS = {"²": "2", "１": "1", "٣": "3", "𝟘": "0"}  # superscript, fullwidth, Arabic-Indic, mathematical


def test_every_kind_has_a_good_value() -> None:
    assert set(GOOD) == set(KINDS)
    for kind, value in GOOD.items():
        assert word(value, kind) == value


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("dashes", ["-", "--", "-m", "--help="])
def test_no_kind_gives_a_word_that_starts_with_a_dash(kind: str, dashes: str) -> None:
    try:
        made = word(dashes + GOOD[kind], kind)
    except Unsafe:
        assert kind not in RELATIVE
        return
    assert kind in RELATIVE and made == f"./{dashes}{GOOD[kind]}" and not made.startswith("-")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_digits_are_ascii_digits(kind: str) -> None:
    for odd, ascii_digit in UNICODE_DIGITS.items():
        value = GOOD[kind] + odd if kind != "number" else odd
        with pytest.raises(Unsafe):
            word(value, kind)
        if kind in ("version", "release", "number"):
            word(value.replace(odd, ascii_digit), kind)


@pytest.mark.parametrize("script", ["-mhttp.server.py", "--help.py", "-Xfrozen_modules=off.py"])
def test_a_traceback_script_named_like_an_option_is_run_as_a_file(tmp_path, script: str) -> None:
    paste = tmp_path / "tb.txt"
    paste.write_text(
        f'Traceback (most recent call last):\n  File "{script}", line 3, in <module>\n    main()\n'
        "RuntimeError: CUDA error: device-side assert triggered\n"
    )
    proc = gpudoctor("check", "--from", str(paste), "--json")
    document = json.loads(proc.stdout)
    commands = [c for item in document["checks"] if item.get("remediation") for c in item["remediation"]["commands"]]
    runs = [c for c in commands if " python " in f" {c}"]
    assert runs, commands
    for command in runs:
        words = [part.word for part in bashlex.parse(command.split("  #")[0])[0].parts if part.kind == "word"]
        assert words[words.index("python") + 1] == f"./{script}", command
