"""AppTest of the "Massive activations & sinks" page for text models (ui/views/massive/text.py): a
tiny random Llama (every section renders, widgets rerun, an encoder works too, a bad model shows an
error) and the bundled SmolLM2 on three pasted texts (the massive dim and the sinks appear)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection

APP = str(Path(__file__).resolve().parents[4] / "app.py")
TIMEOUT = 600
TEXTS = "Summer is warm. Winter is cold.\nThe cat sat on the mat.\nRivers run to the sea."


@pytest.fixture(scope="module")
def tiny_llama(tiny_llama_dir) -> str:
    """The suite's tiny random Llama (tests/conftest.py), as a Custom model source."""
    return str(tiny_llama_dir)


def _page(model: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind="paste",
        corpus_text=TEXTS,
        settings=ExtractionSettings(max_length=32, sample_size=2000),
    )
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page("pages/massive.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _subheaders(at: AppTest) -> list[str]:
    return [s.value for s in at.subheader]


def _open_tab(at: AppTest, tab: str) -> AppTest:
    at.session_state["massive_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_every_section_renders_on_a_tiny_llama(tiny_llama):
    at = _page(tiny_llama, massive_max_length=16)
    assert at.title[0].value == "Massive activations & sinks"
    # lazy tabs: arriving draws the first section only
    assert _subheaders(at) == ["Massive activations per hidden state"]
    assert [m.label for m in at.metric][:3] == [
        "Largest |h|",
        "× median |h| there",
        "Sink share (alpha > 0.3)",
    ]
    for tab in ("One text", "Attention sinks", "int8 outlier features"):
        _open_tab(at, tab)
    # tabs opened during this visit stay drawn
    assert _subheaders(at) == [
        "Massive activations per hidden state",
        "One text",
        "Attention sinks",
        "LLM.int8-style outlier features",
    ]
    assert len(at.dataframe) >= 2
    assert any("Verdict" in m.value for m in at.markdown)
    assert len(at.expander) >= 5  # every view explains itself


def test_widgets_rerun_without_errors(tiny_llama):
    at = _open_tab(_page(tiny_llama, massive_max_length=16), "One text")
    at.text_input(key="massive_text").set_value("Dogs bark. Birds sing.").run()
    assert not at.exception, [e.value for e in at.exception]
    at.select_slider(key="massive_state").set_value("emb").run()
    assert not at.exception, [e.value for e in at.exception]
    at.slider(key="massive_n_texts").set_value(2).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "2 texts" in " ".join(c.value for c in at.caption)


def test_a_text_that_cannot_be_encoded_keeps_the_rest_of_the_page(tiny_llama):
    at = _open_tab(_page(tiny_llama, massive_max_length=16), "One text")
    at.text_input(key="massive_text").set_value("   ").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.error
    assert [m.label for m in at.metric][0] == "Largest |h|"  # the scan above is still shown


def test_an_encoder_gets_the_same_views():
    at = _open_tab(
        _page("random:bert:layers=2,width=32,heads=2,seed=0", massive_max_length=16),
        "Attention sinks",
    )
    assert "Attention sinks" in _subheaders(at)
    assert not at.error


def test_an_unloadable_model_shows_an_error():
    at = _page("/nowhere/at/all")
    assert at.error and "Cannot analyse this selection" in at.error[0].value


def test_bundled_smollm2_shows_massive_activations_and_sinks():
    at = _page("smollm2", massive_max_length=16)
    largest = next(m for m in at.metric if m.label == "Largest |h|")
    assert float(largest.value.replace(",", "")) > 1000
    assert any("dim **507**" in m.value for m in at.markdown)


def test_sidebar_turns_exclude_first_on_for_a_decoder():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        corpus_kind="paste", corpus_text=TEXTS, settings=ExtractionSettings(max_length=32)
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.checkbox(key="sb_exclude_first_encoder").value is False  # MiniLM: an encoder
    at.selectbox(key="sb_model_preset").set_value("SmolLM2-135M-Instruct (bundled decoder)")
    at.run()
    assert at.checkbox(key="sb_exclude_first_decoder").value is True
    assert any("first position excluded" in i.value for i in at.info)


def _overview(model: str, exclude_first: bool) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind="paste",
        corpus_text=TEXTS,
        settings=ExtractionSettings(max_length=32, sample_size=2000, exclude_first=exclude_first),
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_overview_shows_the_first_position_contrast(tiny_llama):
    at = _overview(tiny_llama, exclude_first=False)
    assert "The first position" in _subheaders(at)
    assert any("changes the anisotropy most" in m.value for m in at.markdown)


def test_overview_runs_the_contrast_on_request_when_the_first_position_is_excluded(tiny_llama):
    at = _overview(tiny_llama, exclude_first=True)
    assert "The first position" in _subheaders(at)
    assert not any("changes the anisotropy most" in m.value for m in at.markdown)
    at.button(key="overview_first").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("changes the anisotropy most" in m.value for m in at.markdown)


def test_positional_page_explains_rotary_models_and_offers_the_probe(tiny_llama):
    at = _overview(tiny_llama, exclude_first=True)
    at.switch_page("pages/positional.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("rotary position embeddings" in i.value for i in at.info)
    for tab in ("TUPE decomposition", "Position probe"):
        at.session_state["pos_tab"] = tab
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    at.session_state["pos_tab"] = "TUPE decomposition"
    at.run()
    assert any("TUPE's split needs an additive" in i.value for i in at.info)
