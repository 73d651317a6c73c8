"""Nothing a visitor sends is rendered as markup: text from a link, an input, an upload's name or
an error that quotes any of them reaches the page as the characters typed, inside isoscope's own
notices, captions and titles.

The oracle is a CommonMark renderer with raw HTML on (markdown-it-py): a string that it renders
with no link, image, HTML, heading, list or emphasis is shown by Streamlit as text too, since
Streamlit's Markdown is CommonMark plus extensions that start with the same punctuation
(``:color[...]``, ``:material/...:``, ``$...$``, bare ``www.`` / ``http://`` links), all escaped
by :func:`isoscope.ui.frame.literal.literal`. The browser test in test_shared_offline.py reads the same
notices out of Chromium's DOM."""

from __future__ import annotations

import pytest

from isoscope.engine.errors import InputError
from isoscope.ui.server import access
from tests.hostile.conftest import shared_app
from tests.markup_checks import PAYLOADS, markup_in


def _texts(at) -> list[str]:
    """Every Markdown string the app drew, in the page and the sidebar."""
    values = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "header",
                 "subheader", "toast"):  # fmt: skip
        try:
            values += [str(e.value) for e in at.get(kind)]
        except Exception:  # an element kind this AppTest version does not know
            continue
    values += [str(e.label) for e in at.get("expander")]
    return values


def _assert_no_markup(at, min_hits: int = 1) -> None:
    assert not at.exception, [e.value for e in at.exception]
    hits = [v for v in _texts(at) if "evil" in v]
    assert len(hits) >= min_hits, _texts(at)  # the payload reached the page (and is checked)
    for value in hits:
        # isoscope's own words may be bold or italic; the visitor's text is escaped throughout
        assert markup_in(value) <= {"strong_open", "em_open"} and "evil.example" not in value, value


@pytest.fixture
def no_analysis(monkeypatch):
    """Pages stop at their first step with an IsoscopeError (no model is loaded): the link's
    notices, the sidebar and the error path are what these tests read."""
    from isoscope.ui.frame import page

    def no_model(*args, **kwargs):
        raise InputError("planted: no model in this test")

    monkeypatch.setattr(page, "get_extraction", no_model)
    monkeypatch.setattr(page, "get_model", no_model)


@pytest.mark.parametrize("payload", PAYLOADS[:7])
def test_a_crafted_link_puts_no_markup_in_the_notice(shared_env, no_analysis, payload):
    at = shared_app()
    for param in ("model", "page", "corpus", "state", "out_thr_z"):
        at.query_params[param] = payload
    at.run()
    _assert_no_markup(at)


@pytest.mark.parametrize(
    "params",
    [
        {"page": "compare", "model": "default", "model_b": PAYLOADS[0]},
        {"page": "outliers", "model": "default", "out_thr_z": PAYLOADS[1]},
        {"page": "outliers", "corpus": "images", "folder": PAYLOADS[2]},
        {"page": "overview", "corpus": "paste", "texts": "", "model": PAYLOADS[6]},
    ],
    ids=["model_b", "control", "folder", "model"],
)
def test_every_link_parameter_is_literal(shared_env, no_analysis, params):
    at = shared_app()
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    _assert_no_markup(at)


@pytest.mark.parametrize("payload", PAYLOADS[:4] + PAYLOADS[6:8])
def test_a_typed_model_source_is_literal_in_the_sidebar(shared_env, no_analysis, payload):
    """A shared server refuses it with its one text (nothing echoed); a local one quotes it in
    the sidebar's warning, escaped the same way."""
    at = shared_app()
    at.run()
    at.text_input(key="sb_model_custom").set_value(f"random:bert:{payload}").run()
    _assert_no_markup(at, min_hits=0)
    shared_env.setenv("ISOSCOPE_SHARED", "0")
    access.reset_policy()
    local = shared_app()
    local.run()
    local.text_input(key="sb_model_custom").set_value(f"random:bert:{payload}").run()
    _assert_no_markup(local)


@pytest.mark.parametrize("payload", PAYLOADS[:4] + PAYLOADS[6:8])
def test_an_error_quoting_the_visitor_is_literal(shared_env, no_analysis, payload, monkeypatch):
    """An IsoscopeError's message quotes what the visitor gave (a path, a model id, a file name):
    each view shows it through the same escape."""
    from isoscope.ui.frame import page

    def refuse(*args, **kwargs):
        raise InputError(f"cannot read {payload!r}: planted")

    monkeypatch.setattr(page, "get_extraction", refuse)
    at = shared_app()
    at.run()
    _assert_no_markup(at)


@pytest.mark.parametrize("payload", PAYLOADS[:4] + PAYLOADS[6:8])
def test_an_uploaded_files_name_is_literal(shared_env, no_analysis, payload):
    """The corpus file's name (the browser sends any name) in the sidebar's line and the page."""
    at = shared_app(corpus_kind="upload", corpus_file_name=f"{payload}.txt", corpus_file_sha="0")
    at.run()
    _assert_no_markup(at)
