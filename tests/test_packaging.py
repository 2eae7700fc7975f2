"""gpudoctor as users get it: the wheel and the sdist built from the checkout hold every module and data file of
the tree, and install (non-editable, offline) into fresh environments where the README's commands run with the
exit codes scripts rely on; installing it never plans a change to the user's torch."""

from __future__ import annotations

import json
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers.common import FIXTURES, ROOT
from helpers.installs import (
    PROBE_PACKAGES,
    Dists,
    build,
    distribution_entries,
    env_entries,
    fresh_venv,
    install_wheel,
    lend,
    pip,
    python_c,
    run,
    stand_in_wheel,
)

import gpudoctor

# The checkout's folders and the packages they install as.
FOLDERS = {"gpudoctor": "gpudoctor", "checks": "gpudoctor/checks"}
SNAPSHOT = FIXTURES / "snapshots" / "h100-sxm-8x.json"
XML = FIXTURES / "real" / "h100-2026-11-26" / "nvidia-smi-q-x.xml"


def checkout_files() -> set[str]:
    """Every file of the package folders of the checkout, as paths in it."""
    return {
        path.relative_to(ROOT).as_posix()
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def installed_name(path: str) -> str:
    folder, rest = path.split("/", 1)
    return f"{FOLDERS[folder]}/{rest}"


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    return build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def with_torch(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Path:
    """A fresh venv with the wheel installed, seeing the test env's packages but torchvision (most LLM training
    environments have none)."""
    python = fresh_venv(tmp_path_factory.mktemp("venv") / "env")
    lend(python, env_entries(leave_out=("torchvision",)))
    install_wheel(python, dists.wheel)
    return python


@pytest.fixture(scope="module")
def probe_only(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Path:
    """The README's probe-only node-wide recipe: the light packages and the wheel with --no-deps; no torch."""
    python = fresh_venv(tmp_path_factory.mktemp("probe") / "opt-gpudoctor")
    lend(python, distribution_entries(PROBE_PACKAGES + (("tomli",) if sys.version_info < (3, 11) else ())))
    install_wheel(python, dists.wheel)
    return python


def test_the_wheel_holds_every_module_and_data_file_of_the_tree(dists: Dists) -> None:
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    missing = sorted({installed_name(path) for path in checkout_files()} - names)
    assert not missing, f"not in the wheel: {missing}"
    assert "gpudoctor/diagnosis/rules.py" in names and "gpudoctor/checks/ranks/cnn.py" in names
    assert not [n for n in names if n.startswith("checks/") or "__pycache__" in n]


def test_the_sdist_holds_the_tree_and_what_builds_it(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        names = {name.removeprefix(f"{top}/") for name in archive.getnames()}
    assert not sorted(checkout_files() - names), f"not in the sdist: {sorted(checkout_files() - names)}"
    assert {"pyproject.toml", "setup.py", "README.md"} <= names


def test_the_installed_wheel_is_the_gpudoctor_that_runs(with_torch: Path, tmp_path: Path) -> None:
    here = run(with_torch, "--version", cwd=tmp_path)
    assert (here.returncode, here.stdout.split()[-1]) == (0, gpudoctor.__version__)
    import_from = with_torch.parent.parent
    code = "import gpudoctor, gpudoctor.checks.ddp, gpudoctor.diagnosis.rules; print(gpudoctor.__file__)"
    proc = python_c(with_torch, code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).is_relative_to(import_from), proc.stdout
    listed = run(with_torch, "list", cwd=tmp_path)
    assert listed.returncode == 0 and "ddp.train" in listed.stdout and "driver.nvml" in listed.stdout


def test_check_quick_from_the_wheel_judges_this_machine(with_torch: Path, tmp_path: Path) -> None:
    """Exit 1 here (no GPU: driver.nvml fails), never 3 (gpudoctor broke): hooks read 3 as "not judged"."""
    proc = run(with_torch, "check", "--level", "quick", "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    by_id = {r["check_id"]: r for r in report["checks"]}
    assert by_id["driver.nvml"]["status"] == "fail"
    assert by_id["torch.import"]["status"] == "pass"
    assert by_id["torch.torchvision"]["status"] == "skip", by_id["torch.torchvision"]


def test_check_from_a_file_with_the_wheel(with_torch: Path, tmp_path: Path) -> None:
    proc = run(with_torch, "check", "--from", str(SNAPSHOT), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_probe_only_install_runs_the_hooks_probe_without_torch(probe_only: Path, tmp_path: Path) -> None:
    assert python_c(probe_only, "import torch", tmp_path).returncode == 1
    assert run(probe_only, "--version", cwd=tmp_path).returncode == 0
    assert run(probe_only, "list", cwd=tmp_path).returncode == 0
    probe = ("check", "--only", "health", "driver", "system.shm")
    npd = run(probe_only, *probe, "--format", "npd", cwd=tmp_path)
    # No GPU here: a problem (1), as the prolog reads it; never 2 or 3 (a misuse or a broken gpudoctor).
    assert npd.returncode == 1, npd.stdout + npd.stderr
    nagios = run(probe_only, *probe, "--format", "nagios", cwd=tmp_path)
    assert nagios.returncode == 2 and nagios.stdout.startswith("GPUDOCTOR CRITICAL"), nagios.stdout + nagios.stderr
    offline = run(probe_only, "check", "--from", str(XML), "--only", "driver", "health", cwd=tmp_path)
    assert offline.returncode == 0, offline.stdout + offline.stderr


def test_the_node_wide_install_sees_the_torch_beside_it(with_torch: Path, tmp_path: Path) -> None:
    """The README's --system-site-packages recipe: a venv of its own that sees an existing torch judges that one."""
    proc = run(with_torch, "check", "--only", "torch.import", "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    import torch

    assert report["checks"][0]["status"] == "pass"
    assert torch.__version__ in report["checks"][0]["summary"]


STAND_INS = (
    ("torch", "2.13.0", ()),
    ("torch", "2.15.0", ()),
    ("torchvision", "0.29.2", ("torch==2.15.0",)),
    ("nvidia-ml-py", "13.580.82", ()),
    ("psutil", "7.1.0", ()),
    ("packaging", "25.0", ()),
    ("rich", "14.1.0", ()),
    ("prometheus-client", "0.23.1", ()),
    ("tomli", "2.2.1", ()),
)


def planned(python: Path, links: Path, requirement: str) -> dict[str, str]:
    proc = pip(
        python, "install", "--dry-run", "--quiet", "--report", "-", "--no-index", "--find-links", str(links),
        requirement,
    )  # fmt: skip
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(proc.stdout)["install"]}


def test_installing_never_plans_a_change_to_the_users_torch(dists: Dists, tmp_path: Path) -> None:
    """pip's own resolver, over stand-in wheels: an environment with torch 2.13.0 and no torchvision, newer
    torch and torchvision on offer. The wheel plans only its light dependencies; its `vision` extra (which lets
    pip choose a torchvision) would plan torch 2.15.0, which is why torchvision is not a dependency."""
    links = tmp_path / "links"
    links.mkdir()
    for name, version, requires in STAND_INS:
        stand_in_wheel(links, name, version, requires)
    python = fresh_venv(tmp_path / "train-env")
    pip(python, "install", "--no-deps", "--no-index", str(links / "torch-2.13.0-py3-none-any.whl"))
    plan = planned(python, links, str(dists.wheel))
    assert "torch" not in plan and "torchvision" not in plan, plan
    assert set(plan) <= {"gpudoctor", "nvidia-ml-py", "psutil", "packaging", "rich", "prometheus-client", "tomli"}
    with_vision = planned(python, links, f"gpudoctor[vision] @ {dists.wheel.as_uri()}")
    assert with_vision.get("torch") == "2.15.0", with_vision


def test_ddp_train_without_torchvision_trains_gpudoctors_own_resnet(with_torch: Path, tmp_path: Path) -> None:
    config = tmp_path / "lean.toml"
    config.write_text("[checks.ddp.train]\nsteps = 6\nscaling = false\n")
    proc = run(with_torch, "check", "--only", "ddp.train", "--level", "standard", "--config", str(config), "--json",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(proc.stdout)["checks"]
    loss = next(r for r in results if r["aspect"] == "loss-falls")
    assert loss["status"] == "pass" and "resnet18 (gpudoctor's own" in loss["summary"], loss


def test_a_model_only_torchvision_builds_gets_the_one_paired_install(with_torch: Path, tmp_path: Path) -> None:
    config = tmp_path / "vit.toml"
    config.write_text('[checks.ddp.train]\nmodel = "vit_b_16"\n')
    proc = run(with_torch, "check", "--only", "ddp.train", "--level", "standard", "--config", str(config), "--json",
               cwd=tmp_path)  # fmt: skip
    (result,) = json.loads(proc.stdout)["checks"]
    assert result["status"] == "skip" and "vit_b_16 needs torchvision" in result["summary"]
    (command,) = result["remediation"]["commands"]
    assert command.startswith("pip install torch==") and " torchvision" in command
