"""Every command the fix engine can emit for a driver/wheel mismatch, over a grid of drivers, GPUs, platforms,
distributions and installed torch builds, checked against the tables: the torch release and its variant exist
for that platform, the torchvision is the one PyTorch pairs with it, the index is the variant's and takes the
form PyTorch's pages give that release; the build has kernels for every GPU and the driver runs it (or the
driver named before it does); driver packages name a branch that exists and reaches the minimum, in the
package names of the distribution asked for."""

from __future__ import annotations

import itertools
import re

import pytest

from gpudoctor.judging import compat
from gpudoctor.model import Remediation

PIP = re.compile(
    r"pip install torch==(?P<torch>[\d.]+)\+(?P<tag>\w+)(?: (?P<vision>\S+))? "
    r"(?:--index-url (?P<index>\S+)|--extra-index-url (?P<extra>\S+)|-f (?P<links>\S+))$"
)
GPUS = [(3, 7), (5, 0), (6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (11, 0), (12, 0)]
MIXES = [[(8, 0), (9, 0)], [(7, 0), (12, 0)], [(6, 1), (8, 6)]]
DISTROS = [
    None,
    {"id": "ubuntu", "version_codename": "jammy"},
    {"id": "ubuntu", "version_codename": "noble"},
    {"id": "debian", "version_id": "12"},
    {"id": "rocky", "id_like": "rhel centos fedora", "version_id": "9.4"},
    {"id": "sles", "version_id": "15.6"},
]


def drivers() -> list[str]:
    """Each branch's newest Linux release, and each CUDA toolkit's own minimum (the edges)."""
    table = compat.nvidia_table()
    latest = [b["latest_linux"] for b in table["driver_branch"] if b.get("latest_linux")]
    return sorted(set(latest) | set(table["toolkit_minimum_linux"].values()), key=compat.version)


WINDOWS_DRIVERS = sorted(set(compat.nvidia_table()["toolkit_minimum_windows"].values()), key=compat.version)


def ways(fix: Remediation) -> list[Remediation]:
    return [fix, *ways(fix.instead)] if fix.instead else [fix]


def check_pip(command: str, platform: str) -> compat.Build:
    """The build a pip command installs, after checking it against the tables."""
    found = PIP.match(command)
    assert found, command
    chosen = compat.build(found["torch"], found["tag"], platform)
    assert chosen and chosen.torch == found["torch"], f"no {found['torch']}+{found['tag']} for {platform}: {command}"
    page = f"{compat.WHEEL_INDEX}/{chosen.tag}"
    form = {"index": found["index"] == page, "extra-index": found["extra"] == page}
    assert form.get(chosen.install, found["links"] == compat.FIND_LINKS), command
    paired = chosen.torchvision
    if paired is None:
        assert found["vision"] == "torchvision", command
    elif paired.count(".") == 1:
        assert found["vision"] == f"'torchvision=={paired}.*'", command
    else:
        assert found["vision"] == f"torchvision=={paired}+{chosen.tag}", command
    return chosen


def check_driver_commands(commands: list[str], needed: str, distro: dict | None, platform: str) -> None:
    branch = compat.driver_branch(needed)
    branches = {b["branch"]: b for b in compat.nvidia_table()["driver_branch"]}
    if platform == "windows":
        assert commands == [f"start {compat.nvidia_table()['distro_packages']['windows']['download']}"]
        return
    named = [int(n) for c in commands for n in re.findall(r"(?:nvidia-driver[-:]|pinning-|cuda-drivers-)(\d{3})", c)]
    for number in named:
        assert number in branches, commands
        latest = branches[number].get("latest_linux")
        assert latest is None or not compat.older(latest, needed), (number, needed, commands)
    family = {(distro or {}).get("id", "")} | set((distro or {}).get("id_like", "").split())
    if "ubuntu" in family:
        served = compat.nvidia_table()["distro_packages"]["ubuntu"].get(f"{distro['version_codename']}_server", [])
        for number in re.findall(r"nvidia-driver-(\d{3})-server", " ".join(commands)):
            assert int(number) in served, commands
    if not distro:
        assert commands == [f"nvidia-smi | head -4  # then install NVIDIA driver R{branch} or newer (>= {needed})"]


def check_fix(fix: Remediation, caps: list[tuple[int, int]], driver: str, platform: str, distro: dict | None) -> int:
    """Checks each way of a fix; returns how many commands it checked."""
    checked = 0
    for way in ways(fix):
        installs = [c for c in way.commands if c.startswith("pip install")]
        for command in installs:
            chosen = check_pip(command, platform)
            assert compat.covers(chosen, caps), (command, caps)
        if way.why.startswith("Keep driver"):
            assert len(installs) == 1 and compat.driver_runs(driver, check_pip(installs[0], platform)), way
        needed = re.match(r"Upgrade the driver to >= (\S+) ", way.why)
        if needed:
            check_driver_commands([c for c in way.commands if c not in installs], needed[1], distro, platform)
            for command in installs:
                assert compat.driver_runs(needed[1], check_pip(command, platform)) == "full", way
        checked += len(way.commands)
    return checked


def test_every_command_the_engine_emits_exists_in_the_tables() -> None:
    checked = 0
    grid = itertools.chain(
        itertools.product([[g] for g in GPUS] + MIXES, drivers(), ["linux_x86_64", "linux_aarch64"], DISTROS),
        itertools.product([[g] for g in GPUS] + MIXES, WINDOWS_DRIVERS, ["windows"], [None]),
    )
    for caps, driver, platform, distro in grid:
        fix = compat.driver_fix(caps, driver, platform, distro)
        checked += check_fix(fix, caps, driver, platform, distro)
    assert checked > 20000


@pytest.mark.parametrize("platform", compat.PLATFORMS)
def test_a_fix_for_an_installed_build_keeps_or_names_what_exists(platform: str) -> None:
    """The installed torch is the build wanted: the upgrade keeps it (no pip command), the other way installs
    a build that exists; over every official build of the platform and a driver below it."""
    for installed in compat.cuda_builds(platform):
        minimum = compat.family_minimum(installed.toolkit, platform) or compat.toolkit_minimum(
            installed.toolkit, platform
        )
        if minimum is None:  # CUDA 8: older than NVIDIA's table of minimums
            continue
        below = f"{int(minimum.split('.')[0]) - 10}.00"
        caps = [divmod(int(a[3:].rstrip("af")), 10) for a in installed.arch if a.startswith("sm_")]
        torch = {"version": f"{installed.torch}+{installed.tag}", "cuda": installed.toolkit.rsplit(".", 1)[0]}
        wanted = compat.installed_build({**torch, "arch_list": list(installed.arch)}, platform)
        fix = compat.driver_fix(caps[-1:], below, platform, None, wanted)
        upgrade = next(w for w in ways(fix) if w.why.startswith("Upgrade the driver"))
        assert not any(c.startswith("pip install") for c in upgrade.commands), upgrade
        check_fix(fix, caps[-1:], below, platform, None)


def test_every_release_and_variant_reinstalls_beside_itself() -> None:
    """The torchvision fix keeps torch as it is: for every release and variant the table lists, the command
    names that very build, in the form of its release."""
    for platform in compat.PLATFORMS:
        for entry in compat.torch_table()["release"]:
            for tag in entry.get(platform, []):
                torch = {"version": f"{entry['torch']}+{tag}"}
                command = compat.same_build_command(torch, entry.get("torchvision"))
                if tag == "cpu" or compat.build(entry["torch"], tag, platform):
                    check_pip(command, platform)


def test_both_ways_are_ranked_for_the_user() -> None:
    """Keeping the driver ranks first when it keeps the newest release (a variant change); an old torch on an
    old driver ranks after upgrading the driver."""
    a100 = compat.driver_fix([(8, 0)], "535.104.05", "linux_x86_64", {"id": "ubuntu", "version_codename": "jammy"})
    assert a100.why.startswith("Keep driver 535.104.05: torch 2.15.0+cu126")
    assert a100.instead.commands[:2] == [
        "sudo ubuntu-drivers list --gpgpu",
        "sudo apt install nvidia-driver-595  # R595 or newer: >= 595.71.05",
    ]  # jammy ships no 595-server package
    r470 = compat.driver_fix([(8, 6)], "470.82.01", "linux_x86_64", {"id": "rocky", "version_id": "9.4"})
    assert r470.commands[:2] == ["sudo dnf module enable -y nvidia-driver:595-open", "sudo dnf install -y nvidia-open"]
    assert r470.instead.commands == [
        "pip install torch==2.7.1+cu118 torchvision==0.22.1+cu118 --index-url https://download.pytorch.org/whl/cu118"
    ]
    assert "through minor-version compatibility (torch 1.12.1+cu113 fully)" in r470.instead.why
    rtx50 = compat.driver_fix([(12, 0)], "570.124.06", "windows", None)
    assert rtx50.why.startswith("Upgrade the driver to >= 580")  # Windows: CUDA 13's family minimum


def test_windows_is_judged_by_its_own_platform_and_driver_numbers() -> None:
    """Windows names its CPU AMD64, and its drivers have their own numbers (561.17 for CUDA 12.6 Update 3,
    where Linux needs 560.35.05): once no wheel was ever found there and the driver was not judged."""
    from gpudoctor.checks import torch_build

    assert compat.platform_key("Windows", "AMD64") == "windows"
    assert compat.platform_key("Linux", "aarch64") == "linux_aarch64"
    torch = {"version": "2.14.0+cu126", "cuda": "12.6", "arch_list": ["sm_86"]}
    nvml = {"driver_version": "560.94", "gpus": [{"compute_capability": [8, 6]}]}
    on_windows = torch_build.judge_cuda_driver(torch, nvml, "windows")
    assert on_windows.status.value == "warn" and "full support from 561.17" in on_windows.summary
    assert torch_build.judge_cuda_driver(torch, nvml, "linux_x86_64").status.value == "pass"
    cpu = torch_build.judge_cuda_available(
        {"version": "2.14.0+cpu"},
        {**nvml, "gpus": [{"compute_capability": [8, 6], "name": "NVIDIA RTX A5000"}]},
        {},
        "windows",
    )
    assert cpu.remediation.commands == [
        "pip install torch==2.15.0+cu126 torchvision --index-url https://download.pytorch.org/whl/cu126"
    ]


def test_the_second_way_reaches_every_report_and_reads_back() -> None:
    """The fix's `instead` survives the JSON report (`--from` reads it back) and every renderer shows it."""
    from rich.console import Console

    from gpudoctor.model import Result, Status, result_from_dict
    from gpudoctor.report import console, html, junit

    fix = compat.driver_fix([(8, 6)], "470.82.01", "linux_x86_64", {"id": "ubuntu", "version_codename": "jammy"})
    result = Result(Status.WARN, "old driver", remediation=fix)
    result.check_id = "torch.cuda-driver"
    data = result.to_dict()
    assert result_from_dict(data).remediation == fix
    keep = fix.instead.commands[0]
    screen = Console(width=300, record=True, file=None)
    console._render_results(screen, [result], verbose=False)
    shown = screen.export_text()
    assert "  or" in shown and keep in shown
    assert "<b>Or:</b>" in html._fix(data["remediation"]) and keep in html._fix(data["remediation"])
    assert f"or:\n{fix.instead.why}\n$ {keep}" in junit._details(data)
