"""The analyses on the second zoo (tests/zoo_recent.py: state-space, recurrent, hybrid,
linear-attention, MLA, MoE and AltUp checkpoints of 2025-26, 4 layers, width 64).

Per family, through the CLI entry point in process: ``massive``, ``quant`` and ``qk`` exit 0, or
2 with one ``error:`` line that names the layer kind; never "internal error". And what the views
claim on these models:

- the sink view covers exactly the softmax-attention layers of the layer pattern, and a model
  with none says so in one note while its residual stream is still scanned;
- gated norms and other norms inside mixers are sites of their own (Qwen3-Next / Qwen3.5's Gated
  DeltaNet norm, Kimi-Linear's output norm, MLA's q_a / kv_a norms);
- every Mamba / Mamba-2 mixer has an SSM-input and an out_proj-input site, and the SSM input
  rebuilt from in_proj's output is the tensor the model's chunk scan receives;
- every projection of the blocks (nn.Linear, by its weight) is a module of some quant site, and
  the recipe says per site which norm smooths it or why none does;
- ``qk`` analyses exactly the attention layers and lists the others with their kind; MLA's
  queries are the attention's (nope + rope parts, after the latent up-projection).
"""

from __future__ import annotations

import importlib
import io
import json
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import torch

from tests import zoo_recent
from tests.zoo_checks import TEXTS

FAMILIES = list(zoo_recent.FAMILIES)
MAMBA2_FAMILIES = ["mamba2", "falcon_h1", "bamba", "granitemoehybrid", "nemotron_h", "zamba2"]


@pytest.fixture(scope="session")
def recent_zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo_recent_views")
    return {family: zoo_recent.build(family, root / family) for family in FAMILIES}


@pytest.fixture(scope="session")
def texts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("zoo_recent_texts") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


_LOADED: dict = {}


def loaded_model(recent_zoo, family: str):
    from isoscope.engine.load.models import load_model

    if family not in _LOADED:
        _LOADED.clear()  # one model at a time
        _LOADED[family] = load_model(str(recent_zoo[family]), device="cpu")
    return _LOADED[family]


def run_cli(*args: str) -> tuple[int, list[str]]:
    """The CLI in process: its exit status and its ``error:`` lines."""
    from isoscope.cli import main

    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(list(args))
    text = err.getvalue()
    assert "internal error" not in text and "Traceback" not in text, text[-2000:]
    return rc, [line for line in text.splitlines() if line.startswith("error:")]


# ----------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("family", FAMILIES)
def test_massive_quant_qk_run_or_refuse_in_one_line(family, recent_zoo, texts_file, tmp_path):
    from isoscope.engine.arch import layer_pattern

    folder, pattern = str(recent_zoo[family]), layer_pattern(loaded_model(recent_zoo, family))
    common = ["--model", folder, "--texts", str(texts_file), "--device", "cpu"]
    rc, errors = run_cli(
        "massive", *common, "--out", str(tmp_path / "m.json"), "--max-length", "16"
    )
    assert rc == 0 and not errors
    massive = json.loads((tmp_path / "m.json").read_text())
    assert len(massive["layers"]) == len(pattern.layers) + 1
    sink = massive["attention_sink"]
    if pattern.attention_layers():
        assert sink["layers"] == list(pattern.attention_layers())
        assert {int(k) for k in sink["no_attention_layers"]} == set(pattern.other_layers())
    else:
        assert sink is None
        assert any(pattern.no_attention_reason() in note for note in massive["notes"])

    kinds = {site["kind"] for site in massive["mixer_sites"]}
    if any(m.kind in ("Mamba", "Mamba-2") for k in pattern.layers for m in k.mixers):
        assert {"SSM input", "out_proj input"} <= kinds

    rc, errors = run_cli(
        "quant",
        *common,
        "--out",
        str(tmp_path / "q.json"),
        "--max-length",
        "16",
        "--error-tokens",
        "16",
        "--end-tokens",
        "16",
        "--no-sensitivity",
        "--no-outlier-overlap",
    )
    assert rc == 0 and not errors
    quant = json.loads((tmp_path / "q.json").read_text())
    assert quant["site_map"] and all(site["modules"] for site in quant["site_map"])

    rc, errors = run_cli("qk", *common, "--out", str(tmp_path / "k.json"), "--max-length", "16")
    if not pattern.attention_layers():
        assert rc == 2 and len(errors) == 1
        assert errors[0].startswith(f"error: {pattern.no_attention_reason()}")
        return
    assert rc == 0 and not errors
    settings = json.loads((tmp_path / "k.json").read_text())["settings"]
    assert settings["layers"] == list(pattern.attention_layers())
    assert settings["other_layers"] == {str(k): v for k, v in pattern.other_layers().items()}


def test_pure_recurrent_models_are_refused_by_kind(recent_zoo, texts_file, tmp_path):
    expected = {"mamba": "Mamba", "mamba2": "Mamba-2", "rwkv": "RWKV"}
    for family in zoo_recent.NO_ATTENTION:
        rc, errors = run_cli(
            "qk",
            "--model",
            str(recent_zoo[family]),
            "--texts",
            str(texts_file),
            "--out",
            str(tmp_path / "k.json"),
            "--device",
            "cpu",
        )
        assert rc == 2
        assert errors == [errors[0]] and errors[0].startswith(
            f"error: no attention layers: {expected[family]} mixers only"
        )


# ----------------------------------------------------------------------------- massive, sinks


@pytest.fixture(scope="module")
def scans(recent_zoo):
    from isoscope.analysis.massive.scan import scan_massive

    out = {}
    for family in ("qwen3_next", "qwen3_5_text", "kimi_linear", "deepseek_v3", "mamba", "jamba"):
        out[family] = scan_massive(loaded_model(recent_zoo, family), TEXTS, max_length=16)
    for family in MAMBA2_FAMILIES:
        out[family] = scan_massive(loaded_model(recent_zoo, family), TEXTS, max_length=16)
    return out


def test_gated_and_mixer_norms_are_sites(scans):
    from isoscope.analysis.massive.inner import NORM_OUTPUT

    def norm_sites(family):
        inner = scans[family].inner
        return {s.name: s.mixer for s in inner.sites if s.kind == NORM_OUTPUT}

    for family in ("qwen3_next", "qwen3_5_text"):  # Gated DeltaNet's norm(y, gate), layers 1, 3
        assert norm_sites(family) == {
            "L1.linear_attn.norm": "Gated DeltaNet",
            "L3.linear_attn.norm": "Gated DeltaNet",
        }
    assert {"L1.self_attn.o_norm", "L2.self_attn.kv_a_layernorm"} <= set(norm_sites("kimi_linear"))
    mla = norm_sites("deepseek_v3")
    assert {
        f"L{i}.self_attn.{n}" for i in range(1, 5) for n in ("q_a_layernorm", "kv_a_layernorm")
    } == set(mla)
    assert set(mla.values()) == {"latent attention (MLA)"}
    inner = scans["qwen3_next"].inner
    i = [s.name for s in inner.sites].index("L1.linear_attn.norm")
    assert inner.width[i] == 64  # 4 value heads x 16 channels, read per token
    assert inner.median_abs[i] > 0 and inner.max_abs[i] >= inner.median_abs[i]


def test_state_space_mixers_have_their_inner_readings(scans):
    from isoscope.analysis.massive.inner import OUT_PROJ_INPUT, SSM_INPUT

    for family, layers, kind in [("mamba", [1, 2, 3, 4], "Mamba"), ("jamba", [1, 3], "Mamba")] + [
        (f, None, "Mamba-2") for f in MAMBA2_FAMILIES
    ]:
        scan = scans[family]
        assert scan.inner is not None
        for site_kind in (SSM_INPUT, OUT_PROJ_INPUT):
            found = [s for s in scan.inner.sites if s.kind == site_kind]
            assert found and {s.mixer for s in found} == {kind}, (family, site_kind)
            if layers is not None:
                assert [s.layer for s in found] == layers
        widths = {scan.inner.width[i] for i, s in enumerate(scan.inner.sites) if s.mixer == kind}
        assert widths == {128}  # expand 2 x width 64: the mixer's own channels
    # the residual stream is still scanned on a model with no attention
    assert scans["mamba"].sinks is None and scans["mamba"].massive.n_tokens > 0
    assert scans["mamba"].notes == (
        "attention sinks skipped: no attention layers: Mamba mixers only",
    )


def test_sinks_cover_exactly_the_attention_layers(scans, recent_zoo):
    from isoscope.engine.arch import layer_pattern

    for family in ("jamba", "qwen3_next", "nemotron_h", "zamba2", "falcon_h1"):
        pattern = layer_pattern(loaded_model(recent_zoo, family))
        sinks = scans[family].sinks
        assert sinks.layer_numbers == pattern.attention_layers()
        assert sinks.alpha.shape[0] == len(pattern.attention_layers())
        assert sinks.other_layers == pattern.other_layers()


@pytest.mark.parametrize("family", MAMBA2_FAMILIES)
def test_rebuilt_ssm_input_is_what_the_scan_receives(family, recent_zoo):
    """The SSM input rebuilt from in_proj's output equals the first argument of the modeling
    file's own mamba2_chunk_scan (wrapped here, in the test only)."""
    from isoscope.analysis.massive.inner import ssm_input_from_in_proj
    from isoscope.engine.arch import layer_pattern
    from isoscope.engine.arch.hooks import forward_hooks

    loaded = loaded_model(recent_zoo, family)
    pattern = layer_pattern(loaded)
    named = dict(loaded.model.named_modules())
    mixers = [named[m.path] for k in pattern.layers for m in k.mixers if m.kind == "Mamba-2"]
    module = importlib.import_module(type(loaded.model).__module__)
    received, rebuilt = [], []
    original = module.mamba2_chunk_scan

    def wrapped(x, *args, **kwargs):  # x: (B, T, heads, d_head)
        received.append(x.reshape(*x.shape[:2], -1))
        return original(x, *args, **kwargs)

    def rebuild(mixer):
        return lambda mod, args, out: rebuilt.append(ssm_input_from_in_proj(mixer, out))

    ids = torch.randint(3, 100, (2, 9), generator=torch.Generator().manual_seed(0))
    module.mamba2_chunk_scan = wrapped
    try:
        with forward_hooks({m.in_proj: rebuild(m) for m in mixers}), torch.inference_mode():
            loaded.model(input_ids=ids, use_cache=False)
    finally:
        module.mamba2_chunk_scan = original
    assert len(received) == len(rebuilt) == len(mixers) >= 2
    for a, b in zip(received, rebuilt, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- quant


@pytest.mark.parametrize("family", FAMILIES)
def test_every_projection_is_in_a_site(family, recent_zoo):
    from isoscope.analysis.quant.sites import discover_sites, find_blocks, is_projection

    loaded = loaded_model(recent_zoo, family)
    site_map = discover_sites(loaded)
    _, blocks = find_blocks(loaded.encoder, loaded.info.num_layers)
    named = dict(loaded.encoder.named_modules())
    in_sites = {
        named[p].weight.untyped_storage().data_ptr() for s in site_map.sites for p in s.paths
    }
    missing = [
        name
        for i, block in enumerate(blocks)
        for name, m in block.named_modules()
        if is_projection(m) and m.weight.untyped_storage().data_ptr() not in in_sites
    ]
    assert not missing, missing


def test_quant_sites_of_the_new_mixers(recent_zoo):
    from isoscope.analysis.quant.sites import discover_sites

    def sites(family):
        site_map = discover_sites(loaded_model(recent_zoo, family))
        return site_map, {(s.layer, s.paths[0].split(".")[-1]): s for s in site_map.sites}

    site_map, mamba = sites("mamba")  # dt_proj: used through its weight, a site of its own
    assert mamba[(0, "in_proj")].role == "attn_in" and mamba[(0, "out_proj")].role == "attn_out"
    assert mamba[(0, "x_proj")].role == "other"
    assert not mamba[(0, "dt_proj")].traced and mamba[(0, "x_proj")].traced
    assert any("never called as modules" in note for note in site_map.notes)
    _, mla = sites("deepseek_v3")  # q_b / kv_b inside the latent attention
    assert mla[(1, "q_a_proj")].role == "attn_in" and mla[(1, "o_proj")].role == "attn_out"
    assert mla[(1, "q_b_proj")].role == mla[(1, "kv_b_proj")].role == "other"
    assert mla[(1, "kv_b_proj")].norm is not None  # kv_a_layernorm's output
    _, zamba = sites("zamba2")  # the shared block's adapters are sites, not routed experts
    assert any("adapter_list" in p for s in zamba.values() for p in s.paths)
    minimax, _ = sites("minimax")  # fused MoE experts (3-D weights): not sites, and said so
    assert any(
        "routed-expert module(s)" in note and "mlp.experts" in note for note in minimax.notes
    )
    _, nemotron = sites("nemotron_h")  # the MLP-only layer: MLP input and output
    assert nemotron[(3, "up_proj")].role == "mlp_in"
    assert nemotron[(3, "down_proj")].role == "mlp_out"


def test_recipe_says_per_site_why_not_smoothed(recent_zoo):
    from isoscope.analysis.quant.coverage import NO_NORM, UNTRACED, site_coverage
    from isoscope.analysis.quant.mappings import norm_mappings
    from isoscope.analysis.quant.sites import discover_sites

    for family, expect in [("qwen3_next", "channels (shared across heads)"), ("mamba", UNTRACED)]:
        loaded = loaded_model(recent_zoo, family)
        mappings, skipped, notes = norm_mappings(loaded)
        site_map = discover_sites(loaded)
        rows = site_coverage(site_map, mappings, skipped, notes)
        assert len(rows) == len(site_map.sites)
        assert all(("smoothed_by" in r) != ("not_smoothed" in r) for r in rows)
        assert any("smoothed_by" in r for r in rows)
        assert any(expect in r.get("not_smoothed", "") for r in rows), family
        assert any(r.get("not_smoothed") == NO_NORM for r in rows)


# ----------------------------------------------------------------------------- queries / keys


def test_qk_on_a_hybrid_lists_the_other_layers(recent_zoo):
    from isoscope.analysis.positional.qk import qk_stats

    stats = qk_stats(loaded_model(recent_zoo, "qwen3_5_text"), TEXTS, max_length=16)
    assert stats.layer_numbers == (2, 4) and stats.cos_qk.shape[0] == 2
    assert stats.other_layers == {1: "Gated DeltaNet", 3: "Gated DeltaNet"}
    assert list(stats.frame()["layer"].unique()) == [2, 4]


def test_mla_queries_are_the_attentions_own(recent_zoo):
    """The recorded queries are q_b's output per head, nope part as is and rope part rotated:
    what the attention multiplies."""
    from isoscope.engine.arch.hooks import forward_hooks
    from isoscope.engine.arch.qk_capture import attention_calls

    loaded = loaded_model(recent_zoo, "deepseek_v3")
    config = loaded.model.config
    nope, rope = config.qk_nope_head_dim, config.qk_rope_head_dim
    calls, q_b = [], []
    attention = loaded.model.layers[1].self_attn
    ids = torch.randint(3, 100, (1, 7), generator=torch.Generator().manual_seed(0))
    with (
        attention_calls(loaded.model, calls.append),
        forward_hooks({attention.q_b_proj: lambda m, a, out: q_b.append(out)}),
        torch.inference_mode(),
    ):
        loaded.model(input_ids=ids, use_cache=False)
    call = next(c for c in calls if c.layer == 1)
    heads = config.num_attention_heads
    assert call.q.shape == (1, heads, 7, nope + rope)
    projected = q_b[0].reshape(1, 7, heads, nope + rope).transpose(1, 2).double()
    torch.testing.assert_close(call.q[..., :nope], projected[..., :nope], rtol=1e-6, atol=1e-6)
    rope_norms = call.q[..., nope:].norm(dim=-1)  # a rotation keeps each pair's norm
    torch.testing.assert_close(rope_norms, projected[..., nope:].norm(dim=-1), rtol=1e-5, atol=1e-6)
