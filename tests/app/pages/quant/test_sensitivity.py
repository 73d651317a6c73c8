"""AppTest: the "Sensitivity" tab of the Quantization readiness page
(ui/views/quant/sensitivity.py): one block at a time, and the layer-wise curve on demand."""

from __future__ import annotations

from tests.app.pages.quant.helpers import open_tab, ran, rerun, subheaders


def test_the_sensitivity_and_the_layerwise_curve(tiny_llama_dir):
    at = open_tab(ran(str(tiny_llama_dir)), "Sensitivity")
    assert "Layer sensitivity" in subheaders(at)
    at.toggle(key="quant_prefix").set_value(True)  # the layer-wise curve
    rerun(at)
    assert len(at.get("plotly_chart")) >= 2
