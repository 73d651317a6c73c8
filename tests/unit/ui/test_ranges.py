"""isoscope.ui.widgets.ranges: the page declarations are what links read, and a backend parameter is its own declaration
(the types are tested in tests/unit/engine/test_params.py)."""

from __future__ import annotations

from isoscope.ui.sharing import links
from isoscope.ui.widgets import ranges


def test_links_read_the_page_declarations():
    for page, controls in ranges.LINK_CONTROLS.items():
        assert links._controls(page) is controls
    assert links._controls("overview") == {}
    assert ranges.post_options(include_none=False) == ranges.PROJ_POST.options
    assert "none" in ranges.ANISO_POST.options


def test_the_backend_declarations_are_the_widgets_and_travel_in_links():
    """A parameter the backend reads is declared there once: the page's widget and the link use
    that declaration itself, not a copy with its own range."""
    from isoscope.analysis import outliers
    from isoscope.analysis.layernorm.thresholds import LN_K, LN_SHARE
    from isoscope.analysis.massive.params import MASSIVE_MAX_LENGTH
    from isoscope.analysis.quant import params as quant

    q = ranges.LINK_CONTROLS["quant"]
    assert q["quant_keep"] is quant.KEEP_K and q["quant_alpha"] is quant.SMOOTHQUANT_ALPHA
    assert q["quant_ignore_share"] is quant.IGNORE_SHARE
    assert q["quant_max_length"] is quant.QUANT_MAX_LENGTH
    assert ranges.LINK_CONTROLS["massive"]["massive_max_length"] is MASSIVE_MAX_LENGTH
    ln = ranges.LINK_CONTROLS["layernorm"]
    assert ln["ln_k"] is LN_K and ln["ln_share"] is LN_SHARE
    out = ranges.LINK_CONTROLS["outliers"]
    assert out["out_thr_extreme"] is outliers.EXTREME_SHARE
    assert out["out_thr_z"] is outliers.ZSCORE_K
    assert out["out_thr_q"] is outliers.QUANTILE
    assert out["out_thr_var"] is outliers.VARIANCE_FACTOR
