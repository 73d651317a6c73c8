"""AppTest: the "Layers × role" tab of the Quantization readiness page (ui/views/quant/strip.py):
the heat strip of each quantity."""

from __future__ import annotations

from tests.app.pages.quant.helpers import chart_specs, ran, rerun


def test_the_strip_of_another_quantity(tiny_llama_dir):
    at = ran(str(tiny_llama_dir))
    assert chart_specs(at)
    at.selectbox(key="quant_strip").set_value("error:smoothquant")
    rerun(at)
    assert chart_specs(at)
