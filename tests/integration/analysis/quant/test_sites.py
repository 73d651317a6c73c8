"""Sites and roles found from the model itself on tiny Llama, GPT-2, BERT and Gemma 2 (sandwich
norms): every projection of every block, shared inputs grouped, roles in block order."""

from __future__ import annotations

import pytest

from isoscope.analysis.quant.sites import discover_sites
from isoscope.engine.arch import is_norm
from isoscope.engine.load.models import load_model


def _roles(site_map, layer: int) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.role, s.modules) for s in site_map.sites if s.layer == layer]


def test_llama_groups_qkv_and_gate_up(tiny_llama_dir):
    loaded = load_model(str(tiny_llama_dir), device="cpu")
    sites = discover_sites(loaded)
    assert sites.blocks_path == "layers" and not sites.notes
    assert _roles(sites, 1) == [
        (
            "attn_in",
            (
                "layers.1.self_attn.q_proj",
                "layers.1.self_attn.k_proj",
                "layers.1.self_attn.v_proj",
            ),
        ),
        ("attn_out", ("layers.1.self_attn.o_proj",)),
        ("mlp_in", ("layers.1.mlp.gate_proj", "layers.1.mlp.up_proj")),
        ("mlp_out", ("layers.1.mlp.down_proj",)),
    ]
    assert [s.width for s in sites.sites[:4]] == [32, 32, 32, 64]
    assert [s.norm_fed for s in sites.sites[:4]] == [True, False, True, False]
    # the norm each norm-fed site reads, by the public name SmoothQuant folds its scales into
    assert [s.norm for s in sites.sites[4:8]] == [
        "layers.1.input_layernorm",
        None,
        "layers.1.post_attention_layernorm",
        None,
    ]


def test_gpt2_conv1d_sites(tiny_gpt2_dir):
    sites = discover_sites(load_model(str(tiny_gpt2_dir), device="cpu"))
    assert _roles(sites, 0) == [
        ("attn_in", ("h.0.attn.c_attn",)),
        ("attn_out", ("h.0.attn.c_proj",)),
        ("mlp_in", ("h.0.mlp.c_fc",)),
        ("mlp_out", ("h.0.mlp.c_proj",)),
    ]
    assert sites.sites[3].width == 4 * 32


def test_bert_post_norm_roles(tiny_bert_dir):
    sites = discover_sites(load_model(str(tiny_bert_dir), device="cpu"))
    for layer in (0, 1):  # block 0 is fed by the embeddings' LayerNorm, block 1 by block 0's
        assert _roles(sites, layer) == [
            (
                "attn_in",
                tuple(
                    f"encoder.layer.{layer}.attention.self.{p}" for p in ("query", "key", "value")
                ),
            ),
            ("attn_out", (f"encoder.layer.{layer}.attention.output.dense",)),
            ("mlp_in", (f"encoder.layer.{layer}.intermediate.dense",)),
            ("mlp_out", (f"encoder.layer.{layer}.output.dense",)),
        ]


def test_gemma2_sandwich_norms(tiny_gemma2_dir):
    loaded = load_model(str(tiny_gemma2_dir), device="cpu")
    assert any(type(m).__name__ == "Gemma2RMSNorm" and is_norm(m) for m in loaded.encoder.modules())
    sites = discover_sites(loaded)
    roles = _roles(sites, 1)
    assert [r for r, _ in roles] == ["attn_in", "attn_out", "mlp_in", "mlp_out"]
    assert roles[0][1][0].endswith("self_attn.q_proj") and roles[2][1] == (
        "layers.1.mlp.gate_proj",
        "layers.1.mlp.up_proj",
    )


def test_smollm2_names_match_smoothquant_act_scales_keys():
    loaded = load_model("smollm2", device="cpu")
    sites = discover_sites(loaded)
    assert len(sites.sites) == 4 * 30
    assert sites.sites[12].modules[0] == "model.layers.3.self_attn.q_proj"
    assert sites.sites[12].paths[0] == "layers.3.self_attn.q_proj"


@pytest.mark.parametrize("role", ["attn_in", "mlp_out"])
def test_minilm_every_block_has_each_role(minilm, role):
    sites = discover_sites(minilm)
    assert sorted(s.layer for s in sites.sites if s.role == role) == list(range(6))


@pytest.mark.parametrize("family", ["phi", "falcon"])
def test_parallel_blocks_put_the_mlp_output_last(family, tmp_path):
    """One norm feeds attention and MLP: one attention-input site lists the MLP's input
    projection too, and the projection that reads the MLP's activations is the MLP output."""
    from tests import zoo

    loaded = load_model(str(zoo.build(family, tmp_path / family)), device="cpu")
    roles = _roles(discover_sites(loaded), 1)
    assert [r for r, _ in roles] == ["attn_in", "attn_out", "mlp_out"]
    assert any(".mlp." in m for m in roles[0][1]) and ".mlp." in roles[2][1][0]
