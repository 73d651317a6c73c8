"""The recipe on tiny random Llama, Qwen2-MoE, GPT-2 and Gemma 2 checkpoints: its SmoothQuant
mappings are the traced wiring (every norm whose consumers are all nn.Linear, with all of them),
its ignore list follows the measured per-block sensitivity, the YAML parses back to the same
decisions, and llm-compressor's own parser accepts it where the ``quant`` group is installed."""

from __future__ import annotations

import pytest
import torch
import yaml

from isoscope.analysis.quant.readiness import analyse
from isoscope.analysis.quant.recipe import build_recipe, predict, site_schemes
from isoscope.analysis.quant.sites import public_names
from isoscope.engine.arch import wiring
from isoscope.engine.load.models import load_model
from tests import zoo
from tests.quant_checks import TEXTS, no_hooks, snapshot


@pytest.fixture(scope="module")
def tiny_qwen2_moe_dir(tmp_path_factory):
    return zoo.build("qwen2_moe", tmp_path_factory.mktemp("qwen2_moe") / "m")


FAMILIES = ["tiny_tied_llama_dir", "tiny_qwen2_moe_dir", "tiny_gpt2_dir", "tiny_gemma2_dir"]


@pytest.fixture(scope="module", params=FAMILIES)
def made(request):
    loaded = load_model(str(request.getfixturevalue(request.param)), device="cpu")
    report = analyse(loaded, TEXTS, max_length=24, error_tokens=24, end_tokens=40)
    before = snapshot(loaded.model)
    recipe = predict(loaded, report, build_recipe(loaded, report, ignore_share=0.5, max_blocks=1))
    assert no_hooks(loaded.model)
    assert all(torch.equal(before[k], v) for k, v in snapshot(loaded.model).items())
    return request.param, loaded, report, recipe


def test_mappings_are_the_traced_wiring(made):
    family, loaded, _, recipe = made
    named = dict(loaded.model.named_modules())
    public = public_names(loaded)
    expected = [
        (public(n.path), tuple(public(p) for p in n.feeds_block))
        for n in wiring(loaded).norms
        if n.layer is not None
        and n.feeds_block
        and all(type(named[p]) is torch.nn.Linear for p in n.feeds_block)
    ]
    assert [(m.smooth, m.balance) for m in recipe.mappings] == expected
    smoothed = {m.smooth for m in recipe.mappings}
    assert all(s.smooth not in smoothed for s in recipe.skipped)
    if family == "tiny_gpt2_dir":  # Conv1D everywhere: nothing can take the scales
        assert not recipe.mappings and recipe.skipped and "Conv1D" in recipe.skipped[0].reason
        assert not recipe.regex and any("Conv1D" in n for n in recipe.notes)
    elif family == "tiny_qwen2_moe_dir":  # the MLP norm feeds the router and the fused experts
        assert {m.role for m in recipe.mappings} == {"pre_attn"}
        assert all("post_attention_layernorm" in s.smooth for s in recipe.skipped)
    elif family == "tiny_gemma2_dir":  # sandwich norms: gate/up read pre_feedforward_layernorm
        mlp = [m for m in recipe.mappings if m.role == "pre_mlp"]
        assert mlp and all(m.smooth.endswith("pre_feedforward_layernorm") for m in mlp)
        assert all(m.gamma_offset == 1.0 for m in recipe.mappings)
    else:
        assert {m.role for m in recipe.mappings} == {"pre_attn", "pre_mlp"}
        assert len(recipe.regex) == 2  # one regex per role, as llm-compressor writes them


def test_ignore_list_follows_the_sensitivity(made):
    _, _, report, recipe = made
    sign = 1.0 if report.metric == "kl" else -1.0
    worst = max(report.sensitivity, key=lambda r: sign * r["end"])["layer"]
    assert recipe.ignored_layers == [worst]  # max_blocks=1: the most damaging block
    assert [r["layer"] for r in recipe.blocks][0] == worst
    assert recipe.ignore[0].module == "lm_head"
    kept = {m for s in report.scan.sites if s.site.layer == worst for m in s.site.modules}
    assert {i.module for i in recipe.ignore if i.layer is not None} == kept
    assert all(f"block {worst}: rank 1 of" in i.reason for i in recipe.ignore[1:])
    schemes = site_schemes(report, recipe)
    assert all(
        (x is None) == (s.site.layer == worst)
        for x, s in zip(schemes, report.scan.sites, strict=True)
    )


def test_prediction_and_yaml_round_trip(made):
    _, _, report, recipe = made
    p = recipe.predicted
    assert p["metric"] == report.metric and p["per_token"] == report.end["per_token"]
    if report.metric == "kl":
        assert min(p["recipe"], p["without_ignore"]) > -1e-6  # float32 rounding around 0
    parsed = yaml.safe_load(recipe.yaml())
    assert (
        parsed["quant_stage"]["quant_modifiers"] == recipe.modifiers() == recipe.to_dict()["recipe"]
    )


def test_llmcompressor_parses_the_recipe(made, tmp_path):
    pytest.importorskip(
        "llmcompressor",
        reason="llm-compressor is the optional `quant` group (pip install isoscope[quant]); "
        "it pins transformers<=5.17, so it is not in the default install",
    )
    from llmcompressor.recipe import Recipe

    _, _, _, recipe = made
    path = tmp_path / "recipe.yaml"
    path.write_text(recipe.yaml())
    parsed = Recipe.create_instance(str(path))
    kinds = [type(m).__name__ for m in parsed.modifiers]
    assert kinds == list(recipe.modifiers())
    quant = parsed.modifiers[-1]
    assert list(quant.ignore) == [i.module for i in recipe.ignore]
    if recipe.regex:
        smooth = parsed.modifiers[0]
        assert smooth.smoothing_strength == recipe.alpha
        assert [list(m) for m in smooth.mappings] == [[list(b), s] for b, s in recipe.regex]
    # the rotated variant (QuIPModifier in place of SmoothQuant), whatever this model's verdict
    from dataclasses import replace

    from isoscope.analysis.quant.rotation import Rotation

    block = recipe.rotation.block_size if recipe.rotation else 8
    rotated = replace(recipe, rotation=Rotation(True, "helps", "the parser's test", block))
    path.write_text(rotated.yaml())
    parsed = Recipe.create_instance(str(path))
    assert [type(m).__name__ for m in parsed.modifiers] == ["QuIPModifier", "QuantizationModifier"]
    quip = parsed.modifiers[0]
    assert list(quip.rotations) == ["v"] and quip.transform_type == "hadamard"
    assert quip.transform_block_size == block
    assert list(quip.ignore) == [i.module for i in recipe.ignore]
