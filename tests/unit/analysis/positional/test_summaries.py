"""isoscope.analysis.positional.summaries: the variance lab's slope table."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from isoscope.analysis.positional.summaries import variance_slope_table


def test_slope_table_columns_causal_only_and_with_the_contrast():
    causal = SimpleNamespace(slopes=np.array([-1.0, -0.5]), resid_slopes=np.array([-0.2, -0.1]))
    table = variance_slope_table(causal)
    assert table == {
        "layer": [1, 2],
        "slope, attention output (causal)": [-1.0, -0.5],
        "slope, residual stream (causal)": [-0.2, -0.1],
    }
    bidir = SimpleNamespace(slopes=np.array([0.01, 0.0]))
    with_contrast = variance_slope_table(causal, bidir)
    assert list(with_contrast)[-1] == "slope, attention output (bidirectional)"
    assert with_contrast["slope, attention output (bidirectional)"] == [0.01, 0.0]
    assert all(len(v) == 2 for v in with_contrast.values())
