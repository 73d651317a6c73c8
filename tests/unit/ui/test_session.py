"""The shared session-state slot: one plain string, the one every ui module that reads or writes
the selection uses (no module spells its own)."""

from __future__ import annotations

import re
from pathlib import Path

from isoscope.ui.frame import selection, sidebar
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.sharing import links, saved

ROOT = Path(__file__).resolve().parents[3]


def test_the_selection_key_is_a_plain_string():
    assert type(SELECTION_KEY) is str and SELECTION_KEY == "isoscope_selection"


def test_the_modules_that_share_the_selection_import_the_one_key():
    for module in (selection, links, saved, sidebar):
        assert module.SELECTION_KEY is SELECTION_KEY, module.__name__


def test_no_ui_module_spells_the_key_itself():
    spelled = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "ui").rglob("*.py")
        if path.name != "session.py"
        and re.search(r"[\"']isoscope_selection[\"']", path.read_text())
    ]
    assert spelled == []
