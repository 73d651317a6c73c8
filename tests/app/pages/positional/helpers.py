"""What the AppTests of the Positional page share: the page opened on a selection (a small
random BERT by default, or an image / audio corpus), a tab opened, and the chart titles."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection

APP = str(Path(__file__).resolve().parents[4] / "app.py")
TIMEOUT = 300
TINY_BERT = "random:bert:layers=2,width=64,heads=2,seed=0"


def page(model: str = TINY_BERT, tab: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model, settings=ExtractionSettings(max_length=32, sample_size=2000)
    )
    at.run()
    at.switch_page("pages/positional.py")
    if tab is not None:
        at.session_state["pos_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_tab(at: AppTest, tab: str) -> AppTest:
    at.session_state["pos_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def titles(at: AppTest) -> list[str]:
    out = []
    for el in at.get("plotly_chart"):
        layout = json.loads(el.proto.spec)["layout"]
        out.append(layout.get("title", {}).get("text", ""))
    return out


def media_page(model: str, kind: str, folder: str, tab: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind=kind,
        corpus_text=folder,
        settings=ExtractionSettings(sample_size=1000),
    )
    at.run()
    at.switch_page("pages/positional.py")
    at.session_state["pos_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at
