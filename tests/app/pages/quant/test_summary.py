"""AppTest: the summary of the Quantization readiness page (ui/views/quant/summary.py): the verdict
links to the decision and its recipe; an encoder with the bundled STS pairs shows the
full-precision and per-scheme STS Spearman."""

from __future__ import annotations

from isoscope.analysis.quant.params import KEEP_K
from isoscope.ui.views.quant.shared import RECIPE_ANCHOR
from tests.app.pages.quant.helpers import TINY_BERT, page, ran, rerun, run_analysis, verdict


def test_the_verdict_links_to_the_decision_and_its_recipe(tiny_llama_dir):
    at = ran(str(tiny_llama_dir))
    assert f"(#{RECIPE_ANCHOR})" in verdict(at)
    schemes = [m.label.split(", ", 1)[1] for m in at.metric]  # each scheme's end metric
    assert schemes == ["W8A8 per token", f"keep {KEEP_K.default}", "SmoothQuant", "rotation"]


def test_encoder_sts_change_with_the_bundled_pairs():
    """An encoder offers STS pairs; the bundled sample adds the full-precision and per-scheme
    STS Spearman to the metrics and the verdict."""
    at = page(TINY_BERT)
    at.selectbox(key="quant_pairs").set_value("bundled sample pairs")
    rerun(at)
    run_analysis(at)
    labels = [m.label for m in at.metric]
    assert "STS Spearman × 100, full precision" in labels
    assert any(label.startswith("STS, ") for label in labels)
    assert "STS Spearman" in verdict(at)
