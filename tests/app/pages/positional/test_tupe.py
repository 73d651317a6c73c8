"""AppTest: The TUPE decomposition tab (ui/views/positional/tupe.py): the self-test and a head change."""

from __future__ import annotations

from tests.app.pages.positional.helpers import page, titles


def test_tupe_self_test_and_head_change():
    at = page(tab="TUPE decomposition")
    metric = next(m for m in at.metric if m.label.startswith("Self-test"))
    assert float(metric.value) < 1e-5
    at.number_input(key="pos_tupe_head").set_value(1).run()
    assert any("head 1" in t for t in titles(at))
