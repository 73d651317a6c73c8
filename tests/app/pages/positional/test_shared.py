"""AppTest: The tabs of the Positional page as a whole (ui/views/positional/__init__.py and shared.py):
every tab renders, lazily; a model without a position table, and images or audio on the
text-only tabs, get an explanation instead of a crash."""

from __future__ import annotations

import pytest

from isoscope.ui.frame.selection import Selection
from isoscope.ui.views.positional import TABS
from tests.app.pages.positional.helpers import media_page, open_tab, page, titles


def test_every_tab_renders():
    at = page()
    assert [t.value for t in at.title] == ["Positional information"]
    expected = {
        "Position embeddings": "Cosine similarity of position embeddings",
        "Position probe": "Position probe accuracy",
        "TUPE decomposition": "Relative magnitude of the four terms",
        "Variance lab (NoPE)": "Causal: attention-output variance",
        "Queries & keys": "‖mean query‖",
    }
    for tab in TABS:
        open_tab(at, tab)
        assert not at.error, (tab, [e.value for e in at.error])
        shown = titles(at)
        assert any(expected[tab] in t for t in shown), (tab, shown)
        assert any("What is this" in e.label for e in at.expander), tab


def test_tabs_seen_stay_rendered_and_unseen_ones_wait():
    """Only the open tab runs at first; a tab opened once keeps rendering while the user stays on
    the page (so coming back to it is instant in the browser); leaving the page, or a new corpus,
    starts again from the open tab only."""
    at = page()
    first = titles(at)
    assert not any("Position probe accuracy" in t for t in first), first
    open_tab(at, "Position probe")
    open_tab(at, "Position embeddings")
    shown = titles(at)
    assert any("Position probe accuracy" in t for t in shown), shown
    assert any("Cosine similarity of position embeddings" in t for t in shown), shown
    assert not any("Relative magnitude of the four terms" in t for t in shown), shown
    at.switch_page("pages/overview.py")
    at.run()
    at.switch_page("pages/positional.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = titles(at)
    assert not any("Position probe accuracy" in t for t in shown), shown
    assert any("Cosine similarity of position embeddings" in t for t in shown), shown
    open_tab(at, "Position probe")
    open_tab(at, "Position embeddings")
    selection = at.session_state["isoscope_selection"]
    at.session_state["isoscope_selection"] = Selection(
        model_source=selection.model_source,
        corpus_kind="paste",
        corpus_text="One short text about positions.\nAnother text, a little longer than that.",
        settings=selection.settings,
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = titles(at)
    assert not any("Position probe accuracy" in t for t in shown), shown
    assert any("Cosine similarity of position embeddings" in t for t in shown), shown


def test_models_without_a_position_table_explain_instead_of_failing():
    at = page(model="random:gpt2-nope:layers=2,width=32,heads=2", tab="Position embeddings")
    assert any("no learned absolute position table" in i.value for i in at.info)
    open_tab(at, "TUPE decomposition")
    assert any("Not available" in i.value for i in at.info)


@pytest.mark.parametrize("tab", ["TUPE decomposition", "Queries & keys"])
def test_text_only_tabs_say_why_not_for_images(media, tab):
    at = media_page(media["vit"], "images", media["images"], tab)
    assert any("does not apply" in i.value and "images" in i.value for i in at.info)


def test_audio_says_what_applies(media):
    at = media_page(media["wav2vec2"], "audio", media["audio"], "Position embeddings")
    assert any("convolutional relative position embedding" in i.value for i in at.info)
    at = media_page(media["wav2vec2"], "audio", media["audio"], "TUPE decomposition")
    assert any("does not apply" in i.value and "audio" in i.value for i in at.info)
