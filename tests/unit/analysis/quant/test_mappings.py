"""SmoothQuant's mappings in llm-compressor's form: one regex per role only when the names
repeat in every block and the regex matches exactly those modules."""

from __future__ import annotations

from isoscope.analysis.quant.mappings import regex_mappings
from tests.unit.analysis.quant.helpers import llama_like


def test_uniform_names_become_one_regex_per_role():
    maps = llama_like(3)
    names = {n for m in maps for n in (m.smooth, *m.balance)} | {"model.norm", "lm_head"}
    regex = regex_mappings(maps, names, "model.layers")
    assert regex == [
        (
            (
                "re:.*\\.self_attn\\.q_proj$",
                "re:.*\\.self_attn\\.k_proj$",
                "re:.*\\.self_attn\\.v_proj$",
            ),
            "re:.*\\.input_layernorm$",
        ),
        (
            ("re:.*\\.mlp\\.gate_proj$", "re:.*\\.mlp\\.up_proj$"),
            "re:.*\\.post_attention_layernorm$",
        ),
    ]


def test_a_regex_that_would_match_more_falls_back_to_names():
    maps = llama_like(2)
    # a module outside these mappings that the regex would also catch (e.g. a vision tower's)
    names = {n for m in maps for n in (m.smooth, *m.balance)} | {"vision.0.input_layernorm"}
    regex = regex_mappings(maps, names, "model.layers")
    attn = [r for r in regex if "input_layernorm" in r[1]]
    assert attn == [(m.balance, m.smooth) for m in maps if m.role == "pre_attn"]
