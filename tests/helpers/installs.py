"""gpudoctor installed as users install it, without the network: the wheel and the sdist built from the checkout,
fresh virtual environments that see only the packages a test gives them, and small stand-in wheels for pip's
resolver."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpers.common import ROOT

# pip and every child told nothing of this machine's pip settings (find-links, extra indexes): only what the
# test names is offered.
QUIET_PIP = {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
# What the README's probe-only recipe installs beside the wheel (rich's own needs come with it).
PROBE_PACKAGES = ("nvidia-ml-py", "psutil", "packaging", "rich", "prometheus-client")
OURS = ("gpudoctor", "__editable__")


@dataclass(frozen=True)
class Dists:
    wheel: Path
    sdist: Path


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment less pip's settings, and the checkout never on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    return {**env, **QUIET_PIP, "NO_COLOR": "1", "COLUMNS": "100", **extra}


def build(out: Path) -> Dists:
    """The sdist from the checkout, then the wheel from the sdist (python -m build's default order): a file the
    sdist forgets is missing from the wheel too. No build isolation: setuptools comes from the test env."""
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True, text=True, env=clean_env(), timeout=600,
    )  # fmt: skip
    return Dists(next(out.glob("gpudoctor-*.whl")), next(out.glob("gpudoctor-*.tar.gz")))


def site_packages(python: Path) -> Path:
    return Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip


def fresh_venv(folder: Path) -> Path:
    """A new virtual environment without pip (pip runs from the test env with --python); its python."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    return folder / "bin" / "python"


def lend(python: Path, entries: list[Path], name: str = "lent") -> None:
    """Make `entries` (files and folders of the test env's site-packages) importable in the venv of `python`,
    through a folder of links added as a site directory (so their own .pth files work), after its own
    site-packages: what the venv installs itself wins."""
    target = site_packages(python)
    shelf = target.parent / name
    shelf.mkdir()
    for entry in entries:
        (shelf / entry.name).symlink_to(entry)
    (target / f"zz-{name}.pth").write_text(f"import site; site.addsitedir({str(shelf)!r})\n")


def env_entries(leave_out: tuple[str, ...] = ()) -> list[Path]:
    """Every entry of the test env's site-packages except gpudoctor (however it was installed) and the
    distributions named in `leave_out`, with everything they installed."""
    here = Path(sysconfig.get_paths()["purelib"])
    dropped = {part for name in leave_out for part in _installed_tops(name)}
    return [
        entry
        for entry in sorted(here.iterdir())
        if not entry.name.startswith(OURS) and entry.name not in dropped and not entry.name.startswith("zz-")
    ]


def distribution_entries(names: tuple[str, ...]) -> list[Path]:
    """The site-packages entries of these distributions and of everything they require (markers evaluated
    for this interpreter), with their .dist-info."""
    here = Path(sysconfig.get_paths()["purelib"])
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = _canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        todo += _requirements(name)
    return sorted({here / top for name in seen for top in _installed_tops(name)})


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _requirements(name: str) -> list[str]:
    from packaging.requirements import Requirement

    found = []
    for text in importlib.metadata.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            found.append(req.name)
    return found


def _installed_tops(name: str) -> set[str]:
    """The top-level site-packages entries a distribution installed (its packages, modules and .dist-info)."""
    dist = importlib.metadata.distribution(name)
    return {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}


def pip(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The test env's pip acting on the venv of `python`, offline, told of no index."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *args],
        check=check, capture_output=True, text=True, env=clean_env(), timeout=600,
    )  # fmt: skip


def install_wheel(python: Path, wheel: Path) -> None:
    pip(python, "install", "--no-deps", "--no-index", str(wheel))


def python_c(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=clean_env())


def run(python: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The venv's console script `gpudoctor`, run from `cwd` (never the checkout)."""
    script = python.parent / "gpudoctor"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, cwd=cwd, env=clean_env(**env), timeout=600
    )


def stand_in_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """An empty wheel that says it is `name` `version` and requires `requires`: enough for pip's resolver."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    metadata = "".join(
        [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", *(f"Requires-Dist: {r}\n" for r in requires)]
    )
    files = {
        f"{dist}.dist-info/METADATA": metadata,
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: gpudoctor-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{file},,\n" for file in files) + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in {**files, f"{dist}.dist-info/RECORD": record}.items():
            archive.writestr(file, text)
    return path
