"""AppTest of the "Quantization readiness" page on a tiny random Llama: nothing heavy runs before
the button, then the verdict, every tab, the K / α controls and an encoder render without error."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.engine.extraction import ExtractionSettings
from ui.frame.selection import Selection
from ui.views.quant import RECIPE_ANCHOR

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 600
TEXTS = "Summer is warm. Winter is cold.\nThe cat sat on the mat.\nRivers run to the sea."
SUBHEADERS = {
    "Token × channel": "Token × channel magnitudes",
    "Schemes": "Schemes",
    "Sensitivity": "Layer sensitivity",
    "Before / after": "Before / after",
    "Sites": "Every site",
}


def _page(model: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind="paste",
        corpus_text=TEXTS,
        settings=ExtractionSettings(max_length=32, sample_size=2000),
    )
    at.session_state["quant_max_length"] = 16
    at.run()
    at.switch_page("pages/quant.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_button_then_every_tab_on_a_tiny_llama(tiny_llama_dir):
    at = _page(str(tiny_llama_dir))
    assert at.title[0].value == "Quantization readiness"
    assert not at.subheader  # nothing computed before the button
    at.button(key="quant_run").click()
    _rerun(at)
    assert any(m.value.startswith("**Verdict.**") for m in at.markdown)
    # the decision, with the recipe that carries it out (the share slider moves the ignore list)
    assert any(m.value.startswith("**Decision: W8A8") for m in at.markdown)
    at.slider(key="quant_ignore_share").set_value(0.0)
    _rerun(at)
    assert any("keep only lm_head" in m.value for m in at.markdown)
    assert [s.value for s in at.subheader] == ["Decision and recipe", "Layers × role"]
    for tab, subheader in SUBHEADERS.items():
        at.session_state["quant_tab"] = tab
        _rerun(at)
        assert subheader in [s.value for s in at.subheader]
        if tab == "Before / after":  # the per-channel view of the most spiky site
            charts = [c.proto.spec for c in at.get("plotly_chart")]
            assert any("per channel, before and after" in spec for spec in charts)
    assert len(at.dataframe) >= 2  # the schemes and the sites tables
    at.session_state["quant_tab"] = "Sensitivity"
    at.toggle(key="quant_prefix").set_value(True)  # the layer-wise curve
    _rerun(at)
    assert len(at.get("plotly_chart")) >= 2
    at.toggle(key="quant_outliers").set_value(True)  # the sidebar's extraction, for the overlap
    _rerun(at)
    at.session_state["quant_tab"] = "Layers × role"
    at.selectbox(key="quant_strip").set_value("error:smoothquant")
    _rerun(at)
    # α: the sweep's by default (named in the verdict), the slider's once the toggle is off
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict.**"))
    assert "the lowest mean per-site SmoothQuant error of the sweep" in verdict
    assert f"(#{RECIPE_ANCHOR})" in verdict  # the verdict links to the decision and its recipe
    at.number_input(key="quant_keep").set_value(2)
    at.toggle(key="quant_alpha_auto").set_value(False)
    _rerun(at)  # the slider is disabled while the sweep chooses
    at.slider(key="quant_alpha").set_value(0.8)
    _rerun(at)
    assert any(m.label.endswith("keep 2") for m in at.metric)
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict.**"))
    assert "α = 0.8 as given" in verdict


@pytest.mark.parametrize("model", ["random:bert:layers=2,width=32,heads=2"])
def test_an_encoder_renders(model):
    at = _page(model)
    at.button(key="quant_run").click()
    _rerun(at)
    assert any(m.value.startswith("**Verdict.**") for m in at.markdown)
    assert any("cosine" in m.label for m in at.metric)


def test_encoder_sts_change_with_the_bundled_pairs():
    """An encoder offers STS pairs; the bundled sample adds the full-precision and per-scheme
    STS Spearman to the metrics and the schemes table. Decoders are not offered pairs."""
    at = _page("random:bert:layers=1,width=32,heads=2")
    at.selectbox(key="quant_pairs").set_value("bundled sample pairs")
    _rerun(at)
    at.button(key="quant_run").click()
    _rerun(at)
    labels = [m.label for m in at.metric]
    assert "STS Spearman × 100, full precision" in labels
    assert any(label.startswith("STS, ") for label in labels)
    assert any("STS Spearman" in m.value for m in at.markdown if m.value.startswith("**Verdict."))
    at.session_state["quant_tab"] = "Schemes"
    _rerun(at)
    assert any("STS change" in df.value.columns for df in at.dataframe)


def test_a_decoder_is_not_offered_pairs(tiny_llama_dir):
    at = _page(str(tiny_llama_dir))
    assert not [s for s in at.selectbox if s.key == "quant_pairs"]


def test_the_overview_report_adds_the_pages_analysis():
    """After the page has run, the Overview's full report (findings and download) carries the
    "Quantization readiness" section built from that same analysis."""
    at = _page("random:bert:layers=1,width=32,heads=2")
    at.button(key="quant_run").click()
    _rerun(at)
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict.**"))
    at.switch_page("pages/overview.py")
    _rerun(at)
    at.button(key="overview_full_findings").click()
    _rerun(at)
    section = next(m.value for m in at.markdown if m.value.startswith("**Quantization readiness**"))
    # the page's verdict ends with a link to its own recipe section, which the report has not
    verdict = verdict.removeprefix("**Verdict.** ").split(" [The decision and its recipe")[0]
    assert verdict in section
