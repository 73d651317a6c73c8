"""AppTest: the "Schemes" tab of the Quantization readiness page (ui/views/quant/schemes.py): the
schemes' figure and table, with an encoder's STS change per scheme when pairs are chosen."""

from __future__ import annotations

from tests.app.pages.quant.helpers import TINY_BERT, open_tab, page, ran, rerun, run_analysis


def test_the_schemes_figure_and_table(tiny_llama_dir):
    at = open_tab(ran(str(tiny_llama_dir)), "Schemes")
    assert "Schemes" in [s.value for s in at.subheader]
    assert at.dataframe


def test_the_sts_change_per_scheme_with_the_bundled_pairs():
    at = page(TINY_BERT)
    at.selectbox(key="quant_pairs").set_value("bundled sample pairs")
    rerun(at)
    run_analysis(at)
    open_tab(at, "Schemes")
    assert any("STS change" in df.value.columns for df in at.dataframe)
