"""AppTest: the tabs of the Quantization readiness page as a whole (ui/views/quant/__init__.py and
shared.py): the first tab opens with the analysis, every other tab renders its section when
opened, and the site pickers name each site by block, role and module."""

from __future__ import annotations

from isoscope.ui.views.quant import TABS
from tests.app.pages.quant.helpers import open_tab, ran, subheaders

SUBHEADERS = {
    "Layers × role": "Layers × role",
    "Token × channel": "Token × channel magnitudes",
    "Schemes": "Schemes",
    "Sensitivity": "Layer sensitivity",
    "Before / after": "Before / after",
    "Sites": "Every site",
}


def test_every_tab_renders(tiny_llama_dir):
    at = ran(str(tiny_llama_dir))
    assert "Layers × role" in subheaders(at)
    for tab in TABS:
        open_tab(at, tab)
        assert SUBHEADERS[tab] in subheaders(at), tab
    assert len(at.dataframe) >= 2  # the schemes and the sites tables
    names = at.selectbox(key="quant_site").options
    assert names and all(" · " in n for n in names)
