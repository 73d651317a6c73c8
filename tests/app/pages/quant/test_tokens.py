"""AppTest: the "Token × channel" tab of the Quantization readiness page
(ui/views/quant/tokens.py): one site's magnitudes and its top channels."""

from __future__ import annotations

from tests.app.pages.quant.helpers import open_tab, ran, subheaders


def test_one_sites_magnitudes_and_top_channels(tiny_llama_dir):
    at = open_tab(ran(str(tiny_llama_dir)), "Token × channel")
    assert "Token × channel magnitudes" in subheaders(at)
    assert any(m.value.startswith("Top channels by max |x|") for m in at.markdown)
