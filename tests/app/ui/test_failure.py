"""A page that meets an unplanned error (here: one planted in the Overview's model card) shows one
line saying what failed and how to report it, with the details folded in a closed expander; never
an exception element (Streamlit's traceback) on the page."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.failure import failure_line
from isoscope.ui.frame.selection import Selection
from tests import zoo

APP = str(Path(__file__).resolve().parents[3] / "app.py")


def test_the_line_names_the_page_the_error_and_the_report():
    line = failure_line(IndexError("index out of range in self\nmore"), "Overview")
    assert line.startswith(
        "The Overview page stopped on an unexpected error (IndexError: index out"
    )
    assert "more" not in line and "report" in line


def test_a_planted_error_shows_one_line_and_folded_details(tmp_path, monkeypatch):
    import isoscope.ui.views.overview as overview

    def broken(result):
        raise RuntimeError("planted in the model card")

    monkeypatch.setattr(overview, "cards", broken)
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["isoscope_selection"] = Selection(
        model_source=str(zoo.build("gpt2", tmp_path / "gpt2")),
        device="cpu",
        corpus_kind="paste",
        corpus_text="the cat sat on the w3 .\na dog , the w1 w2 w5 sat !",
        settings=ExtractionSettings(max_length=16, sample_size=50),
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1
    assert errors[0].startswith("The Overview page stopped on an unexpected error (RuntimeError")
    assert "planted in the model card" in errors[0]
    (details,) = [x for x in at.expander if x.label == "Details for the report"]
    code = " ".join(c.value for c in details.code)
    assert "Traceback" in code and "planted in the model card" in code and "torch" in code


def test_a_shared_servers_visitor_sees_the_errors_type_and_the_operator_the_details(
    tmp_path, monkeypatch, capsys
):
    """On a shared server the message and frames (which can name the machine's files) go to the
    server's log; the visitor's line names the page and the error's type only."""
    import isoscope.ui.views.overview as overview
    from isoscope.ui.server import access

    def broken(result):
        raise RuntimeError(f"planted: {tmp_path}/secret.txt")

    monkeypatch.setattr(overview, "cards", broken)
    monkeypatch.setenv("ISOSCOPE_SHARED", "1")
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ISOSCOPE_PASSPHRASE", raising=False)
    access.reset_policy()
    try:
        at = AppTest.from_file(APP, default_timeout=300)
        at.session_state["isoscope_selection"] = Selection(
            model_source="random:bert:layers=2,width=32,heads=2,seed=5",  # allowed when shared
            device="cpu",
            corpus_kind="paste",
            corpus_text="the cat sat on the w3 .\na dog , the w1 w2 w5 sat !",
            settings=ExtractionSettings(max_length=16, sample_size=50),
        )
        at.run()
    finally:
        access.reset_policy()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert errors == [
        "The Overview page stopped on an unexpected error (RuntimeError). The details are in the "
        "server's log; please tell the person who runs this server."
    ]
    assert not [x for x in at.expander if x.label == "Details for the report"]
    assert "secret.txt" not in " ".join(str(e.value) for e in [*at.error, *at.code])
    assert "secret.txt" in capsys.readouterr().err
