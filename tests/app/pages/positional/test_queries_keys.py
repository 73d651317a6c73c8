"""AppTest: The Queries & keys tab (ui/views/positional/queries_keys.py): a metric change, and a
grouped-query rotary model."""

from __future__ import annotations

import json

from tests.app.pages.positional.helpers import page, titles


def test_queries_keys_metric_change():
    at = page(tab="Queries & keys")
    at.selectbox(key="pos_qk_metric").set_value("entropy_norm").run()
    assert not at.exception
    assert any("attention entropy / log(#keys)" in t for t in titles(at))


def test_queries_keys_on_a_grouped_query_rotary_model(tiny_llama_dir):
    """Tiny Llama (4 query heads, 2 key heads, RoPE): the rotation toggle, the kv group in the
    columns and the caption, and the rotary reference."""
    at = page(model=str(tiny_llama_dir), tab="Queries & keys")
    assert not at.error, [e.value for e in at.error]
    assert any("rotary applied" in t for t in titles(at))
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert heat["x"] == ["h0·kv0", "h1·kv0", "h2·kv1", "h3·kv1"]
    assert any("4 query heads share 2 key heads" in c.value for c in at.caption)
    assert any("2104.09864" in e.value for e in at.markdown)
    at.radio(key="pos_qk_rotation").set_value("before").run()
    assert not at.exception and not at.error
    assert any("rotary before" in t for t in titles(at))
