"""The backend is a plain package: no module under backend/ imports streamlit."""

from __future__ import annotations

import re
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[2] / "backend"
_IMPORT = re.compile(r"^\s*(import\s+streamlit\b|from\s+streamlit\b)", re.MULTILINE)


def test_backend_never_imports_streamlit():
    files = sorted(BACKEND.rglob("*.py"))
    assert len(files) > 10  # the scan really sees the package
    offenders = [
        str(p.relative_to(BACKEND.parent))
        for p in files
        if _IMPORT.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_scan_would_catch_an_import():
    assert _IMPORT.search("import numpy\n    import streamlit as st\n")
    assert _IMPORT.search("from streamlit.testing import x")
    assert not _IMPORT.search("# streamlit is not imported here\nimport streamlit_extras_free")
