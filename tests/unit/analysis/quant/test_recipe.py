"""The recipe's rules on planted inputs: the ignore list follows the per-block damage ordering and
stops at the share; mappings become one regex per role only when the names repeat in every block
and the regex matches exactly those modules; the YAML parses back to the same modifiers."""

from __future__ import annotations

import yaml

from backend.analysis.quant.recipe import Ignored, Mapping, Recipe, kept_blocks, regex_mappings


def test_kept_blocks_follow_the_damage_order_until_the_share():
    damage = {0: 1.0, 1: 6.0, 2: 0.5, 3: 2.5}  # shares 0.1, 0.6, 0.05, 0.25
    rows, kept = kept_blocks(damage, keep_share=0.5, max_blocks=4)
    assert [r["layer"] for r in rows] == [1, 3, 0, 2]
    assert kept == [1]  # 60% alone reaches one half
    assert kept_blocks(damage, keep_share=0.8, max_blocks=4)[1] == [1, 3]
    assert kept_blocks(damage, keep_share=0.99, max_blocks=2)[1] == [1, 3]  # the cap
    assert kept_blocks(damage, keep_share=0.0)[1] == []
    assert kept_blocks({0: 0.0, 1: 0.0}, keep_share=0.5)[1] == []  # no damage: nothing kept
    assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-12


def _llama_like(layers: int, prefix: str = "model.layers") -> list[Mapping]:
    out = []
    for i in range(layers):
        p = f"{prefix}.{i}"
        out.append(
            Mapping(
                i,
                "pre_attn",
                f"{p}.input_layernorm",
                tuple(f"{p}.self_attn.{x}_proj" for x in "qkv"),
            )
        )
        out.append(
            Mapping(
                i,
                "pre_mlp",
                f"{p}.post_attention_layernorm",
                (f"{p}.mlp.gate_proj", f"{p}.mlp.up_proj"),
            )
        )
    return out


def test_uniform_names_become_one_regex_per_role():
    maps = _llama_like(3)
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
    maps = _llama_like(2)
    # a module outside these mappings that the regex would also catch (e.g. a vision tower's)
    names = {n for m in maps for n in (m.smooth, *m.balance)} | {"vision.0.input_layernorm"}
    regex = regex_mappings(maps, names, "model.layers")
    attn = [r for r in regex if "input_layernorm" in r[1]]
    assert attn == [(m.balance, m.smooth) for m in maps if m.role == "pre_attn"]


def test_yaml_parses_back_to_the_modifiers_and_keeps_each_reason():
    maps = _llama_like(2)
    recipe = Recipe(
        model="m",
        alpha=0.75,
        mappings=tuple(maps),
        skipped=(),
        ignore=(
            Ignored("lm_head", None, "the output head"),
            Ignored("model.layers.1.mlp.down_proj", 1, "block 1: rank 1 of 2, 70% of the KL"),
        ),
        regex=tuple(
            regex_mappings(maps, {n for m in maps for n in (m.smooth, *m.balance)}, "model.layers")
        ),
        keep_share=0.5,
        max_blocks=4,
        ranked_by="sensitivity",
        metric="kl",
        blocks=(
            {"layer": 1, "damage": 0.7, "share": 0.7},
            {"layer": 0, "damage": 0.3, "share": 0.3},
        ),
        predicted={
            "metric": "kl",
            "end_tokens": 10,
            "recipe": 0.1,
            "without_ignore": 0.2,
            "per_token": 0.3,
            "smoothquant": 0.25,
            "rotation": 0.4,
        },
    )
    text = recipe.yaml()
    parsed = yaml.safe_load(text)
    assert parsed == {"quant_stage": {"quant_modifiers": recipe.modifiers()}}
    mods = parsed["quant_stage"]["quant_modifiers"]
    assert list(mods) == ["SmoothQuantModifier", "QuantizationModifier"]  # smoothing first
    assert mods["QuantizationModifier"]["ignore"] == ["lm_head", "model.layers.1.mlp.down_proj"]
    assert '"model.layers.1.mlp.down_proj"  # block 1: rank 1 of 2, 70% of the KL' in text
    assert recipe.to_dict()["recipe"] == recipe.modifiers()
    decision = recipe.decision()
    assert "α = 0.75" in decision and "keep block 1" in decision
    assert "does not help" in decision  # rotation 0.4 > per-token 0.3 (KL)
