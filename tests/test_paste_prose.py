"""Facts named in sentences (paste/prose.py): a GPU model, a torch build and a driver version written in the words of
an issue feed the cures and judges as an output would, say that they came from prose, and never outvote a tool's
output or stand for the driver answering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.common import gpudoctor
from helpers.growth import LINEAR, growth

from gpudoctor import paste
from gpudoctor.paste import prose


def read(text: str) -> paste.Found:
    return paste.read(text)


def named(text: str) -> list[tuple[str, list[int]]]:
    return [(g["name"], g["compute_capability"]) for g in read(text).facts.get("prose", {}).get("gpus", [])]


@pytest.mark.parametrize(
    ("text", "capability"),
    [
        ("I am on a GeForce RTX 3090 with 24 GB", [8, 6]),
        ("works on my RTX3090 too", [8, 6]),
        ("a single NVIDIA A100-SXM4-80GB", [8, 0]),
        ("Tesla V100 16GB", [7, 0]),
        ("Colab gave me a T4 GPU today", [7, 5]),
        ("NVIDIA T4", [7, 5]),
        ("my GTX 1080 Ti", [6, 1]),
        ("GeForce RTX 5090", [12, 0]),
        ("a GTX-1080 card", [6, 1]),
    ],
)
def test_a_gpu_named_in_a_sentence_is_read_with_its_capability(text: str, capability: list[int]) -> None:
    [(_, found)] = named(text)
    assert found == capability


@pytest.mark.parametrize(
    "text",
    [
        "see cell A2 of the table",
        "T4 template",
        "RTX 30901 is no card",
        "3090 steps done",
        "torch 2.1.0 only",
        "msm-h200-2:4016 NCCL WARN",
    ],
)
def test_words_that_only_look_like_a_gpu_are_not_one(text: str) -> None:
    assert named(text) == []


def test_the_longest_name_wins() -> None:
    assert [n for n, _ in named("an RTX 6000 Ada Generation card")] == [
        next(n for n, _ in named("NVIDIA RTX 6000 Ada") if "Ada" in n)
    ]
    assert named("NVIDIA RTX 6000 Ada")[0][1] == [8, 9]
    assert named("Quadro RTX 6000")[0][1] == [7, 5]


def test_a_torch_build_with_its_tag_is_a_fact_from_prose_and_a_bare_release_is_not() -> None:
    found = read("I installed torch 1.7.1+cu101 with pip")
    assert found.facts["torch"] == {"version": "1.7.1+cu101", "cuda": "10.1"}
    assert found.origins["torch.version"].reader == "prose"
    assert read("pip install torch==2.1.0+cpu").facts["torch"] == {"version": "2.1.0+cpu", "cuda": None}
    assert read("my torch version is 2.0.1 and it fails").facts["torch"] == {}


def test_an_output_is_a_better_witness_than_a_sentence() -> None:
    found = read(
        "PyTorch version: 2.1.0+cu118\nCUDA used to build PyTorch: 11.8\nbefore that I had torch 1.7.1+cu101\n"
    )
    assert found.facts["torch"]["version"] == "2.1.0+cu118" and found.origins["torch.version"].reader == "collect_env"
    assert not found.conflicts


def test_a_driver_in_prose_is_read_but_never_says_the_driver_answered(tmp_path: Path) -> None:
    found = read("my driver version is 470.82.01\n")
    assert found.facts["nvml"]["driver_version"] == "470.82.01"
    snapshot = paste.to_snapshot("p.txt", found)
    assert "status" not in snapshot["nvml"] and "nvml" not in snapshot["sources"]


def test_a_gpu_named_in_prose_chooses_the_build_of_a_no_kernel_image_cure(tmp_path: Path) -> None:
    """The message names no GPU; the sentence does: the cure is the build with kernels for sm_86, not both ways."""
    path = tmp_path / "paste.txt"
    path.write_text(
        "I am on a GeForce RTX 3090 with torch 1.7.1+cu101.\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    document = json.loads(gpudoctor("check", "--from", str(path), "--json").stdout)
    [arch] = [c for c in document["checks"] if c["check_id"] == "torch.arch"]
    fix = arch["remediation"]
    assert "sm_86" in fix["why"], fix
    assert not any("compute_cap" in c for c in fix["commands"]), "the GPU is known: no need to look it up"
    assert document["paste"]["kinds"].get("prose")
    assert document["paste"]["facts_from"]["torch.version"]["reader"] == "prose"


def test_prose_alone_is_still_a_paste_with_nothing_judged(tmp_path: Path) -> None:
    path = tmp_path / "paste.txt"
    path.write_text("I have an RTX 3090 and it does not work\n")
    document = json.loads(gpudoctor("check", "--from", str(path), "--json").stdout)
    assert document["checks"][0]["check_id"] == "paste.read"


@pytest.mark.parametrize(
    "piece", ["NVIDIA GeForce RTX rtx 6000 Ada ", "torch torch: version is ", "driver version is "]
)
def test_the_prose_reader_reads_in_linear_time(piece: str) -> None:
    def run(text: str) -> None:
        prose.read(paste.Found.of(text))

    small, large = (piece * (n // len(piece)) for n in (20_000, 160_000))
    assert growth(run, small, large) < LINEAR
