"""gpudoctor/data/gpus.toml, NVIDIA's GPU names by compute capability (developer.nvidia.com/cuda-gpus and its legacy
page): well formed, each name once, each name its own word sequence, and rows as NVIDIA's pages state them."""

from __future__ import annotations

from importlib import resources

import pytest
import tomllib

from gpudoctor.paste import prose

TABLE = tomllib.loads(resources.files("gpudoctor.data").joinpath("gpus.toml").read_text(encoding="utf-8"))


def test_every_row_is_a_capability_of_named_products_each_once() -> None:
    names = [name for row in TABLE["capability"] for name in row["names"]]
    assert len(names) == len(set(names))
    for row in TABLE["capability"]:
        major, minor = row["cc"].split(".")
        assert major.isdigit() and minor.isdigit() and int(major) >= 3, row["cc"]
        assert row["names"] and all(n.strip() == n and "*" not in n for n in row["names"]), row["cc"]


def test_no_two_names_read_as_the_same_words() -> None:
    assert len(prose.gpu_names()) == sum(len(row["names"]) for row in TABLE["capability"])


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("GeForce RTX 3090", "8.6"),
        ("NVIDIA V100", "7.0"),
        ("NVIDIA T4", "7.5"),
        ("GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA H100", "9.0"),
        ("GeForce RTX 5090", "12.0"),
        ("Tesla K80", "3.7"),
        ("Jetson AGX Orin", "8.7"),
        ("NVIDIA A100", "8.0"),
        ("NVIDIA RTX 6000 Ada", "8.9"),
        ("Quadro RTX 6000", "7.5"),
        ("GeForce GTX TITAN X", "5.2"),
        ("NVIDIA TITAN X", "6.1"),
    ],
)
def test_rows_as_nvidias_pages_state_them(name: str, cc: str) -> None:
    assert [row["cc"] for row in TABLE["capability"] if name in row["names"]] == [cc]
