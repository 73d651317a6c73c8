"""The recipe's rules on planted inputs: the ignore list follows the per-block damage ordering and
stops at the share; mappings become one regex per role only when the names repeat in every block
and the regex matches exactly those modules; the YAML parses back to the same modifiers."""

from __future__ import annotations

import yaml

from backend.analysis.quant.recipe import Ignored, Mapping, Recipe, kept_blocks, regex_mappings


def test_kept_blocks_follow_the_damage_order_until_the_share():
    damage = {0: 1.0, 1: 6.0, 2: 0.5, 3: 2.5}  # shares 0.1, 0.6, 0.05, 0.25
    rows, kept = kept_blocks(damage, ignore_share=0.5, max_blocks=4)
    assert [r["layer"] for r in rows] == [1, 3, 0, 2]
    assert kept == [1]  # 60% alone reaches one half
    assert kept_blocks(damage, ignore_share=0.8, max_blocks=4)[1] == [1, 3]
    assert kept_blocks(damage, ignore_share=0.99, max_blocks=2)[1] == [1, 3]  # the cap
    assert kept_blocks(damage, ignore_share=0.0)[1] == []
    assert kept_blocks({0: 0.0, 1: 0.0}, ignore_share=0.5)[1] == []  # no damage: nothing kept
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
        ignore_share=0.5,
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


def test_a_rotation_worth_it_replaces_smoothquant_and_says_why():
    """Rotation written (QuIPModifier before the quantizer, SmoothQuant left out, the reason as
    a comment) round-trips through YAML; a rotation not written leaves the smoothing and says
    why in the YAML too."""
    from dataclasses import replace

    from backend.analysis.quant.recipe import Rotation

    maps = _llama_like(2)
    base = Recipe(
        model="m",
        alpha=0.5,
        mappings=tuple(maps),
        skipped=(),
        ignore=(Ignored("lm_head", None, "the output head"),),
        regex=tuple(
            regex_mappings(maps, {n for m in maps for n in (m.smooth, *m.balance)}, "model.layers")
        ),
        ignore_share=0.5,
        max_blocks=4,
        ranked_by="sensitivity",
        metric="kl",
        blocks=(),
    )
    rotated = replace(base, rotation=Rotation(True, "helps", "rotation KL 0.01 [0.009–0.011]", 64))
    mods = yaml.safe_load(rotated.yaml())["quant_stage"]["quant_modifiers"]
    assert mods == rotated.modifiers() and list(mods) == ["QuIPModifier", "QuantizationModifier"]
    assert mods["QuIPModifier"] == {
        "rotations": ["v"],
        "transform_type": "hadamard",
        "transform_block_size": 64,
        "ignore": ["lm_head"],
    }
    assert "# rotation: rotation KL 0.01" in rotated.yaml()
    assert rotated.to_dict()["rotation"]["written"] and not rotated.to_dict()["smoothquant"]["used"]
    assert "Hadamard rotation (block 64) instead of SmoothQuant" in rotated.decision()
    kept = replace(base, rotation=Rotation(False, "hurts", "a Hadamard rotation hurts", 64))
    assert list(kept.modifiers()) == ["SmoothQuantModifier", "QuantizationModifier"]
    assert "# rotation: a Hadamard rotation hurts" in kept.yaml()
    assert "hurts" in kept.decision()


def _ends(rotation: tuple[float, float, float], n_texts: int = 16, widths=(64, 192)):
    """A stand-in report with per-token and SmoothQuant KL fixed and the rotation's planted."""
    from types import SimpleNamespace

    import torch

    sites = [SimpleNamespace(site=SimpleNamespace(width=w)) for w in widths]
    scan = SimpleNamespace(sites=sites, end_ids=torch.zeros(n_texts, 4))
    end = {"metric": "kl", "per_token": 0.03, "smoothquant": 0.025, "rotation": rotation[0]}
    interval = {"per_token": [0.028, 0.032], "smoothquant": [0.022, 0.027]}
    interval["rotation"] = list(rotation[1:])
    return SimpleNamespace(end=end, interval=interval, scan=scan, metric="kl")


def test_rotation_is_written_only_when_its_interval_clears_both_rivals():
    from backend.analysis.quant.recipe import rotation_decision

    helps = rotation_decision(_ends((0.01, 0.009, 0.012)))
    assert helps.written and helps.verdict == "helps" and helps.block_size == 64
    assert "0.01 [0.009–0.012]" in helps.reason and "blocks of 64, 64" not in helps.reason
    overlapping = rotation_decision(_ends((0.02, 0.015, 0.023)))  # overlaps SmoothQuant
    assert not overlapping.written and overlapping.verdict == "not settled"
    hurts = rotation_decision(_ends((0.05, 0.045, 0.055)))
    assert not hurts.written and hurts.verdict == "hurts"
    few = rotation_decision(_ends((0.01, 0.009, 0.012), n_texts=3))
    assert not few.written and "too few" in few.reason
