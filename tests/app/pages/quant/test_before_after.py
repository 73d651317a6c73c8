"""AppTest: the "Before / after" tab of the Quantization readiness page
(ui/views/quant/before_after.py): every site before and after, and the per-channel view of the
most spiky site, for SmoothQuant and the rotation."""

from __future__ import annotations

from tests.app.pages.quant.helpers import chart_specs, open_tab, ran, rerun, subheaders


def test_every_site_and_one_sites_channels(tiny_llama_dir):
    at = open_tab(ran(str(tiny_llama_dir)), "Before / after")
    assert "Before / after" in subheaders(at)
    assert any("per channel, before and after" in spec for spec in chart_specs(at))
    at.radio(key="quant_transform").set_value("rotation")
    rerun(at)
    assert any("per channel, before and after" in spec for spec in chart_specs(at))
