"""Every uploader on every page goes through the one checked uploader (isoscope.ui.widgets.upload), so no
page can accept a file that the upload limit refuses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
THE_ONE = ROOT / "ui" / "widgets" / "upload.py"


def uploader_calls(source: str) -> list[int]:
    """Lines that call ``<anything>.file_uploader(...)``."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "file_uploader"
    ]


def test_no_page_builds_its_own_uploader():
    files = [*ROOT.joinpath("ui").rglob("*.py"), *ROOT.joinpath("pages").rglob("*.py")]
    files.append(ROOT / "app.py")
    offenders = {
        str(p.relative_to(ROOT)): uploader_calls(p.read_text())
        for p in files
        if p != THE_ONE and uploader_calls(p.read_text())
    }
    assert offenders == {}
    assert uploader_calls(THE_ONE.read_text())  # the one place does build it


@pytest.mark.parametrize(
    "source",
    [
        "import streamlit as st\nst.file_uploader('x')\n",
        "c1, c2 = st.columns(2)\nc2.file_uploader('Corpus B')\n",
        "with st.sidebar:\n    st.sidebar.file_uploader('y', key='k')\n",
    ],
)
def test_the_scan_finds_an_uploader_however_it_is_reached(source):
    assert uploader_calls(source) == [source.count("\n")]
