"""isoscope installs as a tool: the wheel built from this checkout, installed into a fresh virtual
environment that reuses the already-installed dependencies (nothing is downloaded), gives an
``isoscope`` command whose ``--help`` and ``analyze`` work on the bundled model, with the app,
pages and assets shipped inside the wheel."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from isoscope.engine.environment import offline_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip(
        "setuptools", reason="setuptools (isoscope's build backend) is not installed"
    )
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True,
        env=offline_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
        capture_output=True,
    )  # fmt: skip
    (found,) = out.glob("isoscope-*.whl")
    return found


def test_wheel_holds_the_packages_the_app_and_the_command(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "isoscope/__init__.py",
        "isoscope/cli.py",
        "isoscope/engine/load/models.py",
        "isoscope/ui/work/extraction.py",
        "isoscope/ui/views/overview.py",
        "isoscope/ui/widgets/frontend/atlas.html",
        "isoscope/app/app.py",
        "isoscope/app/pages/overview.py",
        "isoscope/app/assets/sample_corpus.txt",
        "isoscope/app/.streamlit/config.toml",
    ):
        assert required in names, f"{required} missing from {wheel.name}"
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"isoscope"}, (
        f"the wheel installs more than one top-level name: {top_level}"
    )
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "isoscope = isoscope.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed (--no-deps); the dependencies come from this
    interpreter's site-packages through a .pth file (read as plain paths, so this checkout's own
    editable install is not picked up)."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    deps = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    Path(purelib, "_isoscope_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         "--no-index", str(wheel)],
        check=True, env=offline_env(PIP_DISABLE_PIP_VERSION_CHECK="1"), capture_output=True,
    )  # fmt: skip
    return env_dir


def _run(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = offline_env()
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(installed / "bin" / "isoscope"), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_isoscope_help_and_version_of_the_installed_wheel(installed, tmp_path):
    done = _run(installed, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for command in ("serve", "analyze", "massive", "report", "compare"):
        assert command in done.stdout
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import isoscope; print(isoscope.__file__)"],
        cwd=tmp_path, env=offline_env(), capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(installed) in where, f"isoscope imported from {where}, not from the wheel"


def test_isoscope_analyze_on_the_bundled_model(installed, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("The cat sat on the mat.\nA second, longer sentence about dogs.\nThird.\n")
    out = tmp_path / "out.json"
    done = _run(
        installed, "analyze", "--model", "default", "--texts", str(texts), "--out", str(out),
        "--no-cache", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(), parse_constant=_refuse)
    assert report["model"]["num_layers"] == 6
    assert len(report["layers"]) == 7


def test_installed_serve_finds_the_app_shipped_in_the_wheel(installed, tmp_path):
    code = (
        "from isoscope.commands.serve import streamlit_command; "
        "print(streamlit_command('127.0.0.1', 8501)[4])"
    )
    app = subprocess.run(
        [str(installed / "bin" / "python"), "-c", code],
        cwd=tmp_path, env=offline_env(), capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert app.endswith("isoscope/app/app.py") and str(installed) in app
    assert os.path.isfile(app)


def _refuse(token: str):
    raise ValueError(f"not strict JSON: {token}")
