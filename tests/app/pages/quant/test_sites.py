"""AppTest: the "Sites" tab of the Quantization readiness page (ui/views/quant/sites.py): every
site's table, and its overlap with the sidebar extraction's outlier dims on demand."""

from __future__ import annotations

from tests.app.pages.quant.helpers import open_tab, ran, rerun, subheaders


def test_every_site_with_the_outlier_overlap(tiny_llama_dir):
    at = open_tab(ran(str(tiny_llama_dir)), "Sites")
    assert "Every site" in subheaders(at)
    at.toggle(key="quant_outliers").set_value(True)  # the sidebar's extraction, for the overlap
    rerun(at)
    assert any("outlier overlap" in df.value.columns for df in at.dataframe)
