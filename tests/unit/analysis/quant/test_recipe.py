"""The recipe on planted decisions: the YAML parses back to the same modifiers and keeps each
ignored module's reason; a rotation worth it replaces SmoothQuant and says why."""

from __future__ import annotations

import yaml

from isoscope.analysis.quant.ignore_list import Ignored
from isoscope.analysis.quant.mappings import regex_mappings
from isoscope.analysis.quant.recipe import Recipe
from tests.unit.analysis.quant.helpers import llama_like


def test_yaml_parses_back_to_the_modifiers_and_keeps_each_reason():
    maps = llama_like(2)
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

    from isoscope.analysis.quant.rotation import Rotation

    maps = llama_like(2)
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
