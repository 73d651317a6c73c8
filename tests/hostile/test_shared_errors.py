"""A shared server keeps error details in its log: an error planted behind every page, and in each
part of the frame around the pages (the link, the sidebar and its fragments, the cache panel, a
page's own fragment, and one that escapes isoscope altogether), shows the visitor one line with
no traceback, message or server path, while the server's log (stderr) gets all of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.conftest import APP, shared_app

SECRET = "/srv/isoscope-secret/models/weights.bin"
ROOT = Path(APP).parent


def _page_stems() -> list[str]:
    """The URL path of every declared analysis's page (isoscope.analysis.ANALYSES, which the
    navigation reads)."""
    from isoscope.analysis import ANALYSES

    return [a.name for a in ANALYSES if (ROOT / "pages" / a.page).exists()]


def _planted(*args, **kwargs):
    raise RuntimeError(f"planted: cannot open {SECRET}")


def _everything_shown(at) -> str:
    parts = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "code", "text",
                 "title", "exception"):  # fmt: skip
        try:
            elements = at.get(kind)
        except Exception:
            continue
        for element in elements:
            parts.append(str(getattr(element, "value", "")))
            parts.append(str(getattr(element, "message", "")))
            parts.append(" ".join(getattr(element, "stack_trace", None) or []))
    parts += [str(e.label) for e in at.get("expander")]
    return "\n".join(parts)


def _assert_kept_in_the_log(at, capsys, *, isoscope_line: bool = True) -> None:
    shown = _everything_shown(at)
    assert SECRET not in shown and "isoscope-secret" not in shown, shown
    assert "Traceback" not in shown and 'File "' not in shown, shown
    assert not [e for e in at.get("expander") if "Details" in str(e.label)]
    if isoscope_line:
        assert not at.exception, [e.value for e in at.exception]
        assert any("details are in the server's log" in str(e.value) for e in at.error), shown
        log = capsys.readouterr().err
        assert SECRET in log and "Traceback" in log


@pytest.mark.parametrize("stem", _page_stems())
def test_an_error_behind_each_page_stays_in_the_log(shared_env, stem, monkeypatch, capsys):
    """Every page starts from the frame's loaders (ui/frame/page.py); an error planted there
    reaches the frame around ``navigation.run()``."""
    from isoscope.ui.frame import page

    monkeypatch.setattr(page, "load_or_stop", _planted)
    monkeypatch.setattr(page, "model_and_corpus_or_stop", _planted)
    at = shared_app()
    at.query_params["page"] = stem
    at.run()
    _assert_kept_in_the_log(at, capsys)


FRAME_PARTS = {
    # what is planted, and what the visitor does to reach it
    "link": ("isoscope.ui.sharing.links", "known_model", {"model": "default"}),
    "sidebar fragment": ("isoscope.ui.frame.sidebar", "source_is_causal", {}),
    "sidebar": ("isoscope.ui.frame.sidebar", "saved_panel", {}),
    "cache panel fragment": ("isoscope.ui.frame.cache_panel", "default_cache_limit", {}),
    "link notice": ("isoscope.ui.sharing.links", "show_link_notice", {}),
}


@pytest.mark.parametrize("part", list(FRAME_PARTS))
def test_an_error_in_the_frame_stays_in_the_log(shared_env, part, monkeypatch, capsys):
    import importlib

    module, name, params = FRAME_PARTS[part]
    monkeypatch.setattr(importlib.import_module(module), name, _planted)
    from isoscope.ui.frame import page

    def stop(*args, **kwargs):  # the page itself needs no model here
        import streamlit as st

        st.stop()

    monkeypatch.setattr(page, "load_or_stop", stop)
    monkeypatch.setattr(page, "model_and_corpus_or_stop", stop)
    at = shared_app()
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    _assert_kept_in_the_log(at, capsys)


def test_an_error_in_a_pages_fragment_stays_in_the_log(shared_env, monkeypatch, capsys):
    """A fragment's error is shown by the fragment (isoscope.ui.frame.failure.fragment), not by Streamlit."""
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.ui.views import outliers

    monkeypatch.setattr(outliers, "plot_outlier_heatmap", _planted)
    at = shared_app(
        corpus_kind="paste",
        corpus_text="the cat sat on the mat .\na dog ran in the park !",
        settings=ExtractionSettings(max_length=16, sample_size=50),
    )
    at.query_params["page"] = "outliers"
    at.run()
    _assert_kept_in_the_log(at, capsys)
    assert [t.value for t in at.title] == ["Outlier dimensions"]  # the rest of the page is there


def test_an_error_no_part_of_isoscope_catches_shows_no_details(shared_env, monkeypatch):
    """Streamlit's own error box, the last resort, names nothing on a shared server."""
    from isoscope.engine.errors import InputError
    from isoscope.ui.frame import page
    from isoscope.ui.server import warmup

    def refuse(*args, **kwargs):  # the frame shows this one; the script goes on after it
        raise InputError("no model in this test")

    monkeypatch.setattr(page, "load_or_stop", refuse)
    monkeypatch.setattr(warmup, "start_umap_warmup", _planted)  # after the frame's try
    at = shared_app()
    at.query_params["page"] = "outliers"
    at.run()
    _assert_kept_in_the_log(at, None, isoscope_line=False)
    assert at.exception  # Streamlit's box, with nothing in it but that an error happened
    assert "RuntimeError" not in _everything_shown(at)


def test_on_a_local_server_the_details_are_folded_on_the_page(monkeypatch, tmp_path):
    """The same planted error on localhost: the line and the details for a report (the person
    reading them runs the server)."""
    from isoscope.ui.frame import page
    from isoscope.ui.server import access

    monkeypatch.setenv("ISOSCOPE_SHARED", "0")
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(page, "load_or_stop", _planted)
    access.reset_policy()
    try:
        at = shared_app()
        at.query_params["page"] = "anisotropy"
        at.run()
    finally:
        access.reset_policy()
    assert not at.exception
    (details,) = [x for x in at.expander if x.label == "Details for the report"]
    assert SECRET in " ".join(c.value for c in details.code)
