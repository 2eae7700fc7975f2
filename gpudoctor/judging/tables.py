"""Refresh gpudoctor's torch table from the package registry, at each torch release.

`python -m gpudoctor.judging.tables` compares the releases PyPI serves (torch, torchvision) with
gpudoctor/data/torch.toml and prints a [[release]] row, as TOML, for each torch release the table lacks: its
date, the platforms PyPI has wheels for, the CUDA variant PyPI's own wheel is (from its cuda-toolkit or
nvidia-cuda-runtime pin), and the torchvision that declares it. `--write` appends those rows to the table and
moves its `newest_torch`; `--installed` prints the [[build]] row of the torch installed in this environment
(its CUDA and arch list, asked of torch itself in a child process). `--from DIR` reads saved
`torch.json`/`torchvision.json` instead of the network. What the registry cannot say (the other variants'
toolkits and arch lists, NVIDIA's minimum drivers) is refreshed by hand: docs/TABLES.md says how.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpudoctor.judging import compat

PYPI = "https://pypi.org/pypi/{}/json"
PLATFORM_TAGS = (("win_amd64", "windows"), ("aarch64", "linux_aarch64"), ("x86_64", "linux_x86_64"))
CUDA_PIN = re.compile(r"^(?:cuda-toolkit(?:\[[^\]]*\])?|nvidia-cuda-runtime-cu\d+)==(\d+\.\d+(?:\.\d+)?)")
ARCH_PROBE = (
    "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
    "'arch': torch.cuda.get_arch_list() if torch.version.cuda else []}))"
)


class TablesError(Exception):
    """A registry or file that cannot be read: one line for the user."""


def fetch(project: str, folder: Path | None, timeout: float = 30) -> dict[str, Any]:
    """PyPI's JSON document of a project, from the registry or a saved copy (`folder`/<project>.json)."""
    where = str(folder / f"{project}.json") if folder else PYPI.format(project)
    try:
        if folder:
            return json.loads(Path(where).read_text())
        with urllib.request.urlopen(where, timeout=timeout) as answer:
            return json.loads(answer.read())
    except (OSError, urllib.error.URLError, ValueError) as exc:
        raise TablesError(f"cannot read {where}: {exc}") from exc


def final_releases(document: dict[str, Any]) -> list[str]:
    """The project's final releases with at least one file not yanked, oldest first."""
    found = []
    for text, files in document.get("releases", {}).items():
        try:
            parsed = Version(text)
        except InvalidVersion:
            continue
        if not (parsed.is_prerelease or parsed.is_devrelease) and any(not f.get("yanked") for f in files):
            found.append(text)
    return sorted(found, key=Version)


def missing_releases(torch_json: dict[str, Any], table: dict[str, Any]) -> list[str]:
    """torch releases PyPI serves that the table lacks (1.0 on)."""
    known = {r["torch"] for r in table["release"]}
    return [r for r in final_releases(torch_json) if r not in known and Version(r) >= Version("1.0")]


def platforms(files: list[dict[str, Any]]) -> list[str]:
    """The wheel platforms a release has files for on PyPI, by their wheel tags."""
    seen = {key for f in files for tag, key in PLATFORM_TAGS if f["filename"].endswith(f"{tag}.whl")}
    return [p for p in compat.PLATFORMS if p in seen]


def pypi_toolkit(requires_dist: list[str] | None) -> str | None:
    """The CUDA toolkit PyPI's torch wheel is built against, from its pin on cuda-toolkit (CUDA 13 on) or on
    nvidia-cuda-runtime-cuXX (CUDA 12): the newest release's metadata only (PyPI's `info`)."""
    for requirement in requires_dist or []:
        found = CUDA_PIN.match(requirement.replace(" ", ""))
        if found:
            return found.group(1)
    return None


def declaring_torchvision(vision_json: dict[str, Any], release: str, previous: str) -> str | None:
    """The newest torchvision, where its declared torch requirement admits this release but not the one
    before it (a torchvision built for this release); None where it declares none so narrow."""
    info = vision_json.get("info", {})
    declared = [r.split(";")[0] for r in info.get("requires_dist") or [] if re.match(r"^torch\s*[<>=!~]", r)]
    try:
        spec = SpecifierSet(declared[0][len("torch") :].strip()) if declared else None
    except InvalidSpecifier:
        return None
    if spec and spec.contains(release) and not spec.contains(previous):
        return info.get("version")
    return None


def release_row(release: str, torch_json: dict[str, Any], vision_json: dict[str, Any], table: dict[str, Any]) -> str:
    """One [[release]] row as TOML, each figure the registry does not give marked unverified."""
    files = torch_json["releases"][release]
    previous = max((r["torch"] for r in table["release"] if Version(r["torch"]) < Version(release)), key=Version)
    like = compat.release(previous) or {}
    is_newest = torch_json.get("info", {}).get("version") == release
    toolkit = pypi_toolkit(torch_json["info"].get("requires_dist")) if is_newest else None
    default = f"cu{''.join(toolkit.split('.')[:2])}" if toolkit else like.get("pypi_default", "cpu")
    vision = declaring_torchvision(vision_json, release, previous)
    dates = sorted(f.get("upload_time_iso_8601", "")[:10] for f in files if f.get("upload_time_iso_8601"))
    lines = [
        "",
        "[[release]]",
        f"# PyPI JSON API: files uploaded {dates[0] if dates else 'on an unknown date'}"
        + (f"; its wheel pins CUDA toolkit {toolkit}" if toolkit else "")
        + f". Written by `python -m gpudoctor.judging.tables`; variants copied from {previous} until read from "
        "download.pytorch.org (docs/TABLES.md).",
        f'torch = "{release}"',
    ]
    if dates:
        lines.append(f'date = "{dates[0]}"')
    if vision:
        lines.append(f'torchvision = "{vision}"')
    lines.append(f'pypi_default = "{default}"' + ("" if toolkit else f"  # unverified: as for {previous}"))
    for platform in platforms(files):
        tags = like.get(platform) or ["cpu"]
        lines.append(f"{platform} = {json.dumps(tags)}  # unverified: as for {previous}")
    lines.append(f'install = "{like.get("install", "index")}"')
    return "\n".join(lines) + "\n"


def installed_row(python: str = sys.executable) -> str:
    """The [[build]] row of the torch installed in `python`'s environment, asked of torch in a child."""
    try:
        done = subprocess.run([python, "-c", ARCH_PROBE], capture_output=True, text=True, timeout=120, check=True)
        facts = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        raise TablesError(f"cannot ask the installed torch: {exc}") from exc
    tag = compat.variant_of(facts)
    if tag == "cpu":
        raise TablesError(f"torch {facts['version']} is a CPU build: it has no [[build]] row")
    release = compat.release_of(facts["version"])
    arch = ", ".join(f'"{a}"' for a in sorted(facts["arch"], key=_arch_key))
    platform = compat.platform_key(sys.platform, _machine())
    return (
        f"\n[[build]]\n# torch {facts['version']} installed here: torch.version.cuda={facts['cuda']}, "
        f"torch.cuda.get_arch_list(). The toolkit's update (e.g. {facts['cuda']}.2) is in PyPI's pin or the build "
        f'matrix (docs/TABLES.md).\ntag = "{tag}"\ntoolkit = "{facts["cuda"]}"  # unverified: the update\n'
        f'torch_first = "{release}"\ntorch_last = "{release}"\n{platform} = [{arch}]\n'
    )


def _arch_key(arch: str) -> tuple[int, int]:
    kind, _, code = arch.partition("_")
    return (kind != "sm", int(re.sub(r"\D", "", code) or 0))


def _machine() -> str:
    import platform

    return platform.machine()


def write(rows: list[str], newest: str, path: Path) -> None:
    """Append the rows to the table and move its newest_torch."""
    text = path.read_text()
    text = re.sub(r'^newest_torch = "[^"]*"', f'newest_torch = "{newest}"', text, count=1, flags=re.MULTILINE)
    path.write_text(text.rstrip("\n") + "\n" + "".join(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpudoctor.judging.tables", description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="folder", type=Path, help="read torch.json and torchvision.json from here")
    parser.add_argument("--write", action="store_true", help="append the new rows to gpudoctor/data/torch.toml")
    parser.add_argument("--installed", action="store_true", help="print the [[build]] row of the torch here")
    args = parser.parse_args(argv)
    try:
        if args.installed:
            print(installed_row(), end="")
            return 0
        table = compat.torch_table()
        torch_json, vision_json = fetch("torch", args.folder), fetch("torchvision", args.folder)
        missing = missing_releases(torch_json, table)
        rows = [release_row(r, torch_json, vision_json, table) for r in missing]
    except TablesError as exc:
        print(f"gpudoctor.judging.tables: {exc}", file=sys.stderr)
        return 2
    said = f"torch.toml knows up to {table['newest_torch']}; PyPI adds {', '.join(missing) or 'nothing'}"
    print(f"# {said}", file=sys.stderr)
    if args.write and rows:
        write(
            rows,
            max([table["newest_torch"], *missing], key=Version),
            Path(str(resources.files("gpudoctor.data").joinpath("torch.toml"))),
        )
    else:
        print("".join(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
