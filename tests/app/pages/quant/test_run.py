"""AppTest: the opening of the Quantization readiness page (ui/views/quant/run.py): nothing heavy
runs before the button; the K and α controls reach the analysis; an encoder's end metric is the
cosine and it is offered STS pairs, a decoder is not; once run, the Overview's report carries the
page's analysis."""

from __future__ import annotations

import pytest

from tests.app.conftest import shown as as_shown
from tests.app.pages.quant.helpers import TINY_BERT, page, ran, rerun, run_analysis, verdict


def test_nothing_runs_before_the_button(tiny_llama_dir):
    at = page(str(tiny_llama_dir))
    assert at.title[0].value == "Quantization readiness"
    assert any("What is this" in e.label for e in at.expander)
    assert not at.subheader  # nothing computed before the button
    run_analysis(at)
    assert any(m.value.startswith("**Verdict.**") for m in at.markdown)


def test_keep_k_and_alpha_reach_the_analysis(tiny_llama_dir):
    """α: the sweep's by default (named in the verdict), the slider's once the toggle is off."""
    at = ran(str(tiny_llama_dir))
    assert "the lowest mean per-site SmoothQuant error of the sweep" in verdict(at)
    at.number_input(key="quant_keep").set_value(2)
    at.toggle(key="quant_alpha_auto").set_value(False)
    rerun(at)  # the slider is disabled while the sweep chooses
    at.slider(key="quant_alpha").set_value(0.8)
    rerun(at)
    assert any(m.label.endswith("keep 2") for m in at.metric)
    assert "α = 0.8 as given" in verdict(at)


@pytest.mark.parametrize("model", ["random:bert:layers=2,width=32,heads=2"])
def test_an_encoder_renders(model):
    at = ran(model)
    assert any(m.value.startswith("**Verdict.**") for m in at.markdown)
    assert any("cosine" in m.label for m in at.metric)


def test_a_decoder_is_not_offered_pairs(tiny_llama_dir):
    at = page(str(tiny_llama_dir))
    assert not [s for s in at.selectbox if s.key == "quant_pairs"]


def test_the_overview_report_adds_the_pages_analysis():
    """After the page has run, the Overview's full report (findings and download) carries the
    "Quantization readiness" section built from that same analysis."""
    at = ran(TINY_BERT)
    shown = verdict(at)
    at.switch_page("pages/overview.py")
    rerun(at)
    at.button(key="overview_full_findings").click()
    rerun(at)
    section = next(m.value for m in at.markdown if m.value.startswith("**Quantization readiness**"))
    # the page's verdict ends with a link to its own recipe section, which the report has not
    shown = shown.removeprefix("**Verdict.** ").split(" [The decision and its recipe")[0]
    assert shown in as_shown(section)  # the report's findings are escaped text
