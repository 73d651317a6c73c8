"""The wheel's package list (pyproject's ``[tool.setuptools] packages``) names every folder of
``backend/`` and ``ui/`` that holds Python modules, under the name it installs as, and nothing
else: a new analysis package that is not listed would work in the checkout and be missing from
the installed wheel."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def package_folders(root: Path, package_dir: dict[str, str]) -> set[str]:
    """The packages that the folders mapped in ``package_dir`` hold, under their installed names."""
    found = set()
    for name, folder in package_dir.items():
        base = root / folder
        if folder == ".":  # the app's folder maps whole; its pages and data are listed apart
            found.add(name)
            continue
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and "__pycache__" not in path.parts and any(path.glob("*.py")):
                found.add(".".join((name, *path.relative_to(base).parts)))
    return found


def test_every_folder_with_modules_is_a_listed_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    expected = package_folders(ROOT, config["package-dir"])
    assert not expected - listed, (
        "add these to [tool.setuptools] packages in pyproject.toml: "
        + str(sorted(expected - listed))
    )
    assert not listed - expected, "listed packages with no folder: " + str(
        sorted(listed - expected)
    )


def test_the_rule_names_an_unlisted_folder(tmp_path):
    (tmp_path / "backend" / "analysis" / "new").mkdir(parents=True)
    (tmp_path / "backend" / "__init__.py").write_text("")
    (tmp_path / "backend" / "analysis" / "new" / "core.py").write_text("")
    found = package_folders(tmp_path, {"isoscope": "backend"})
    assert found == {"isoscope", "isoscope.analysis.new"}
