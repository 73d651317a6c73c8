"""The architecture map (isoscope.engine.arch) on tiny random models of every family it knows.

Each family: where q/k/v, the embeddings, the position table, the embedding norm and the per-layer
norms live, the position-embedding kind, and the canonical norm names built on top of it. A new
family in backend/engine/arch/families.py gets one entry in FAMILY_CASES below.
"""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from isoscope.analysis.layernorm.params import find_norms, ln_params
from isoscope.engine.arch import (
    POSITION_KINDS,
    architecture,
    position_embedding_label,
    position_table,
    projection_inputs,
    wiring,
)
from isoscope.engine.errors import UnsupportedModelError

W, L, H, V = 32, 2, 4, 100
COMMON = dict(vocab_size=V, hidden_size=W, num_hidden_layers=L, num_attention_heads=H)
DECODER = dict(COMMON, intermediate_size=64, num_key_value_heads=2)


def _bert_like(config_cls, **extra):
    return config_cls(**COMMON, intermediate_size=64, **extra)


# family name -> (model builder, expected: position kind, q/k/v layout, layer-1 norm paths by role,
# embedding norm path, final norm path, position table path, token-type table path)
FAMILY_CASES = {
    "bert": (
        lambda: tf.BertModel(_bert_like(tf.BertConfig)),
        dict(
            family="BERT-style encoder",
            kind="learned absolute",
            qkv="separate",
            query="encoder.layer.0.attention.self.query",
            norms={
                "attn": "encoder.layer.0.attention.output.LayerNorm",
                "out": "encoder.layer.0.output.LayerNorm",
            },
            emb_norm="embeddings.LayerNorm",
            final=None,
            table="embeddings.position_embeddings",
            token_type="embeddings.token_type_embeddings",
        ),
    ),
    "distilbert": (
        lambda: tf.DistilBertModel(
            tf.DistilBertConfig(vocab_size=V, dim=W, n_layers=L, n_heads=H, hidden_dim=64)
        ),
        dict(
            family="DistilBERT",
            kind="learned absolute",
            qkv="separate",
            query="transformer.layer.0.attention.q_lin",
            norms={
                "attn": "transformer.layer.0.sa_layer_norm",
                "out": "transformer.layer.0.output_layer_norm",
            },
            emb_norm="embeddings.LayerNorm",
            final=None,
            table="embeddings.position_embeddings",
            token_type=None,
        ),
    ),
    "roberta": (
        lambda: tf.RobertaForMaskedLM(_bert_like(tf.RobertaConfig)),
        dict(
            family="BERT-style encoder",
            kind="learned absolute",
            qkv="separate",
            query="roberta.encoder.layer.0.attention.self.query",
            norms={
                "attn": "roberta.encoder.layer.0.attention.output.LayerNorm",
                "out": "roberta.encoder.layer.0.output.LayerNorm",
            },
            emb_norm="roberta.embeddings.LayerNorm",
            final=None,
            table="roberta.embeddings.position_embeddings",
            token_type="roberta.embeddings.token_type_embeddings",
        ),
    ),
    "electra": (
        lambda: tf.ElectraModel(_bert_like(tf.ElectraConfig, embedding_size=16)),
        dict(
            family="BERT-style encoder",
            kind="learned absolute",
            qkv="separate",
            query="encoder.layer.0.attention.self.query",
            norms={
                "attn": "encoder.layer.0.attention.output.LayerNorm",
                "out": "encoder.layer.0.output.LayerNorm",
            },
            emb_norm="embeddings.LayerNorm",
            final=None,
            table="embeddings.position_embeddings",
            token_type="embeddings.token_type_embeddings",
        ),
    ),
    "gpt2": (
        lambda: tf.GPT2Model(
            tf.GPT2Config(
                vocab_size=V, n_embd=W, n_layer=L, n_head=H, bos_token_id=None, eos_token_id=None
            )
        ),
        dict(
            family="GPT-2",
            kind="learned absolute",
            qkv="fused",
            query="h.0.attn.c_attn",
            norms={"pre_attn": "h.0.ln_1", "pre_mlp": "h.0.ln_2"},
            emb_norm=None,
            final="ln_f",
            table="wpe",
            token_type=None,
        ),
    ),
    **{
        name: (
            (lambda cls=cls, model=model: model(cls(**DECODER))),
            dict(
                family="Llama-style decoder",
                kind="rotary",
                qkv="separate",
                query="layers.0.self_attn.q_proj",
                norms={
                    "pre_attn": "layers.0.input_layernorm",
                    "pre_mlp": "layers.0.post_attention_layernorm",
                },
                emb_norm=None,
                final="norm",
                table=None,
                token_type=None,
            ),
        )
        for name, cls, model in (
            ("llama", tf.LlamaConfig, tf.LlamaModel),
            ("qwen2", tf.Qwen2Config, tf.Qwen2Model),
            ("mistral", tf.MistralConfig, tf.MistralModel),
        )
    },
    "opt": (
        lambda: tf.OPTModel(
            tf.OPTConfig(**COMMON, ffn_dim=64, word_embed_proj_dim=W, max_position_embeddings=64)
        ),
        dict(
            family="OPT",
            kind="learned absolute",
            qkv="separate",
            query="decoder.layers.0.self_attn.q_proj",
            norms={
                "pre_attn": "decoder.layers.0.self_attn_layer_norm",
                "pre_mlp": "decoder.layers.0.final_layer_norm",
            },
            emb_norm=None,
            final="decoder.final_layer_norm",
            table="decoder.embed_positions",
            token_type=None,
        ),
    ),
}


@pytest.fixture(scope="module")
def built():
    torch.manual_seed(0)
    return {name: build() for name, (build, _) in FAMILY_CASES.items()}


@pytest.mark.parametrize("name", list(FAMILY_CASES))
def test_the_map_finds_every_part(built, name):
    model = built[name]
    want = FAMILY_CASES[name][1]
    arch = architecture(model)
    assert arch.family.name == want["family"]
    assert arch.position_kind == want["kind"] and arch.position_kind in POSITION_KINDS
    assert len(arch.layers) == L and arch.hidden_size == W and arch.num_heads == H
    first = arch.layers[0]
    if want["qkv"] == "fused":
        assert first.query is None and arch.path(first.fused_qkv) == want["query"]
    else:
        assert first.fused_qkv is None and arch.path(first.query) == want["query"]
        assert arch.path(first.key) == want["query"].replace("query", "key").replace("q_", "k_")
        assert arch.path(first.value) == want["query"].replace("query", "value").replace("q_", "v_")
    assert {role: arch.path(m) for role, m in first.norms} == want["norms"]
    assert arch.pre_ln == (want["final"] is not None)
    for attr in ("embedding_norm", "final_norm", "position_table", "token_type_table"):
        key = {"embedding_norm": "emb_norm", "final_norm": "final", "position_table": "table"}.get(
            attr, "token_type"
        )
        module = getattr(arch, attr)
        assert (arch.path(module) if module is not None else None) == want[key], attr
    assert arch.path(arch.word_embeddings).endswith(("word_embeddings", "wte", "embed_tokens"))
    assert (position_table(model) is not None) == (want["table"] is not None)


@pytest.mark.parametrize("name", list(FAMILY_CASES))
def test_canonical_norm_names_follow_the_map(built, name):
    model = built[name]
    want = FAMILY_CASES[name][1]
    sites = {s.name: s for s in find_norms(model)}
    for role, path in want["norms"].items():
        assert sites[f"L1.{role}_ln"].path == path and sites[f"L1.{role}_ln"].layer == 1
    assert ("final_ln" in sites) == (want["final"] is not None)
    # ELECTRA's embedding LayerNorm is narrower than the model (16 < 32): left out
    assert ("emb.ln" in sites) == (want["emb_norm"] is not None and name != "electra")
    assert ("head.ln" in sites) == (name == "roberta")
    rms = want["family"] == "Llama-style decoder"
    assert all(s.has_bias != rms for s in sites.values())


def test_model_card_labels(built):
    assert position_embedding_label(built["bert"]).startswith("absolute, learned (512")
    assert position_embedding_label(built["llama"]) == "rotary (RoPE)"
    assert position_embedding_label(built["mistral"]) == "rotary (RoPE)"


def test_gemma_rmsnorm_reports_and_ablates_the_effective_gamma():
    """Gemma's RMSNorm scales by 1 + weight: gamma is reported as weight + 1, and ablating a dim
    really zeroes that dim of the norm's output."""
    from isoscope.analysis.layernorm.ablation import ablated

    model = tf.Gemma2Model(tf.Gemma2Config(**DECODER, head_dim=8))
    arch = architecture(model)
    assert arch.family.name == "Llama-style decoder" and arch.position_kind == "rotary"
    assert arch.gamma_offset == 1.0
    sites = {s.name: s for s in find_norms(model)}
    assert sites["L1.attn_ln"].path == "layers.0.post_attention_layernorm"
    assert sites["L1.out_ln"].path == "layers.0.post_feedforward_layernorm"
    assert sites["L1.pre_mlp_ln"].path == "layers.0.pre_feedforward_layernorm"
    params = ln_params([sites["L1.pre_attn_ln"]])
    assert torch.allclose(torch.as_tensor(params.gamma), torch.ones(1, W, dtype=torch.float64))
    norm = sites["L1.pre_attn_ln"].module
    x = torch.randn(1, 3, W)
    with ablated(model, [3, 7], ["L1.pre_attn_ln"]):
        out = norm(x)
    assert torch.all(out[..., [3, 7]] == 0) and torch.all(out[..., 0] != 0)
    assert torch.all(norm.weight == 0)  # restored


def test_nope_models_report_no_position_kind():
    from isoscope.engine.load.models import build_random_model

    model = build_random_model("gpt2-nope", {"layers": 1, "width": 32, "heads": 2}, V)
    arch = architecture(model)
    assert arch.position_kind == "none" and arch.absolute_position_table is None
    assert arch.position_table is model.wpe  # the zeroed table is still where the map says


def test_unknown_families_are_a_clear_error():
    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = type("C", (), {"model_type": "toy", "hidden_size": 8})()

    with pytest.raises(UnsupportedModelError, match="Toy \\(toy\\).*known layouts: BERT-style"):
        architecture(Toy())
    assert position_table(Toy()) is None


@pytest.mark.parametrize("name", list(FAMILY_CASES))
def test_projection_inputs_and_wiring_are_one_decision(built, name):
    """Which norm feeds which projection is decided once, in one traced pass: every norm's
    ``feeds_block`` is exactly the projection calls whose ``norm`` is that norm; calls that share
    one input point at the first of them, all inside one block."""
    model = built[name]
    inputs = projection_inputs(model)
    assert inputs and {i.layer for i in inputs} == set(range(L))
    for norm in wiring(model).norms:
        fed = {i.path for i in inputs if i.norm == norm.path}
        assert fed == set(norm.feeds_block), norm.path
    for k, call in enumerate(inputs):
        first = inputs[call.shared]
        assert call.shared <= k and first.shared == call.shared
        assert first.layer == call.layer and first.width == call.width and first.norm == call.norm
    if FAMILY_CASES[name][1]["qkv"] == "separate":  # q, k and v read one tensor
        query = FAMILY_CASES[name][1]["query"]
        key = query.replace("query", "key").replace("q_", "k_")
        by_path = {i.path: i for i in inputs}
        prefix = next(p for p in by_path if p.endswith(query))[: -len(query)]
        assert by_path[prefix + query].shared == by_path[prefix + key].shared
