"""AppTest: The Variance lab (NoPE) tab (ui/views/positional/variance.py): its widgets and bad heads."""

from __future__ import annotations

from tests.app.pages.positional.helpers import page


def test_variance_lab_widgets_and_bad_heads():
    at = page(tab="Variance lab (NoPE)")
    at.select_slider(key="pos_var_width").set_value(64)
    at.select_slider(key="pos_var_seq").set_value(64)
    at.slider(key="pos_var_layers").set_value(2).run()
    assert not at.exception and not at.error
    slopes = at.dataframe[0].value
    assert len(slopes) == 2
    assert -1.3 < slopes.iloc[0, 1] < -0.6  # layer 1, causal
    assert abs(slopes.iloc[0, 3]) < 0.1  # layer 1, bidirectional
    at.number_input(key="pos_var_heads").set_value(3).run()
    assert any("divisible" in e.value for e in at.error)
