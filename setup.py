"""The package list, found from the tree so that no module or data file can be left out of the wheel.

`checks/` installs as `gpudoctor.checks` (pyproject.toml holds everything else); tests/test_packaging.py builds
the wheel and the sdist and holds them equal to the tree.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
# Where each top-level package lives in the checkout.
ROOTS = {"gpudoctor": "gpudoctor", "gpudoctor.checks": "checks"}
CODE = {".py", ".pyc"}


def packages() -> list[str]:
    """Every folder with an __init__.py below each root, named as it installs."""
    found = []
    for name, folder in ROOTS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(str(HERE / folder))]
    return found


def package_folder(package: str) -> Path:
    root = max((name for name in ROOTS if package == name or package.startswith(f"{name}.")), key=len)
    return HERE / ROOTS[root] / Path(*package.split(".")[root.count(".") + 1 :])


def data_files(package: str) -> list[str]:
    """Every file of the package's folder and its plain (non-package) subfolders that is not code."""
    folder = package_folder(package)
    found = []
    for path in sorted(folder.rglob("*")):
        inside = path.relative_to(folder)
        if not path.is_file() or path.suffix in CODE or "__pycache__" in inside.parts:
            continue
        if any((folder / Path(*inside.parts[:i]) / "__init__.py").exists() for i in range(1, len(inside.parts))):
            continue  # a subpackage's own file: listed under that package
        found.append(inside.as_posix())
    return found


PACKAGES = packages()
setup(
    packages=PACKAGES,
    package_dir=ROOTS,
    package_data={package: files for package in PACKAGES if (files := data_files(package))},
)
