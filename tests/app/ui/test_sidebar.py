"""AppTest of the shared sidebar: what is typed is what runs, and the sidebar says so first."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from isoscope.ui.frame.selection import Selection
from isoscope.ui.frame.session import SELECTION_KEY
from isoscope.ui.frame.sidebar import MODEL_PRESETS

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 240
MISSING = "/no/such/isoscope/checkpoint"


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception
    return at


def _selected(at: AppTest) -> str:
    """The model source the pages analyse now."""
    state = at.session_state
    return (state[SELECTION_KEY] if SELECTION_KEY in state else Selection()).model_source


def _run_button(at: AppTest):
    return next(b for b in at.button if b.label == "Run analysis")


def test_typed_custom_model_runs_although_the_preset_says_default():
    """The trap of issue 8: a path typed into Custom model with the Model select left on
    "default" must be what runs (not the default model), and the sidebar says so first."""
    at = _app()
    assert at.selectbox(key="sb_model_preset").value.startswith("default")
    at.text_input(key="sb_model_custom").input(MISSING).run()
    assert not at.exception
    pending = " ".join(i.value for i in at.sidebar.info)
    assert "will analyse" in pending and MISSING in pending
    assert _selected(at) == "default"  # nothing ran yet
    _run_button(at).click().run()
    assert not at.exception
    assert _selected(at) == MISSING
    assert any("does not exist" in e.value for e in at.error)
    assert any(MISSING in c.value for c in at.sidebar.caption)


def test_custom_choice_with_an_empty_field_cannot_run():
    at = _app()
    custom = next(label for label, source in MODEL_PRESETS.items() if source == "custom")
    at.selectbox(key="sb_model_preset").set_value(custom).run()
    assert not at.exception
    assert any("Custom model" in w.value for w in at.sidebar.warning)
    assert _run_button(at).disabled
    assert _selected(at) == "default"


def test_preset_change_is_announced_then_applied():
    at = _app()
    label = next(label for label, source in MODEL_PRESETS.items() if source == "random:gpt2")
    at.selectbox(key="sb_model_preset").set_value(label).run()
    assert any("random:gpt2" in i.value for i in at.sidebar.info)
    assert _selected(at) == "default"
    _run_button(at).click().run()
    assert not at.exception
    assert _selected(at) == "random:gpt2"
    assert not at.sidebar.info  # nothing pending any more
