"""The dimension card on tiny random models with planted dimensions: a component that writes a
known constant at d (a bias set, its weight row zeroed) is found with the right layer, component
and value; a norm weight set to a known value is read back; the parts sum to the value on every
token; checked on a pre-norm decoder (Llama), a post-norm encoder (BERT), an SSM (Mamba) and an
MoE (Mixtral, split by expert against an independent computation from the hidden states)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from tests import zoo, zoo_recent
from tests.dimension_models import TEXTS, D
from tests.dimension_models import load_tiny as _load


def _card(loaded, state: int, **kw):
    kw = {"ablation_texts": 0} | kw
    return dimension_card(loaded, TEXTS, DimensionSettings(state=state, dim=D, **kw))


def _rows(card, **match) -> list[dict]:
    return [r for r in card.contributions if all(r.get(k) == v for k, v in match.items())]


def _assert_sums(card) -> None:
    assert card.sum_check <= 1e-5 * max(card.value_scale, 1.0)


def _plant_bias(linear: torch.nn.Linear, value: float) -> None:
    with torch.no_grad():
        linear.weight[D].zero_()
        linear.bias[D] = value


@pytest.mark.parametrize("value", [50.0, -7.5])
@pytest.mark.parametrize("layer", [1, 2])
def test_prenorm_decoder_finds_the_mlp_that_writes_a_constant(tmp_path, layer, value):
    loaded = _load(tmp_path, zoo, "llama", mlp_bias=True, num_hidden_layers=3)
    _plant_bias(loaded.model.layers[layer - 1].mlp.down_proj, value)
    card = _card(loaded, state=layer)
    _assert_sums(card)
    (mlp,) = _rows(card, layer=layer, component="mlp")
    assert mlp["mean"] == pytest.approx(value, abs=1e-4)
    assert mlp["first_position"] == pytest.approx(value, abs=1e-4)
    biggest = max(card.contributions, key=lambda r: abs(r["mean"]))
    assert (biggest["layer"], biggest["component"]) == (layer, "mlp")
    heads = _rows(card, layer=layer, component="attention head")
    assert len(heads) == loaded.model.config.num_attention_heads


def test_prenorm_decoder_sums_through_the_final_norm(tmp_path):
    loaded = _load(tmp_path, zoo, "llama")
    card = _card(loaded, state=loaded.info.num_layers)
    _assert_sums(card)
    assert card.value_scale > 0


@pytest.mark.parametrize("value", [5.0, -3.0])
@pytest.mark.parametrize("layer", [1, 2])
def test_postnorm_encoder_names_the_norm_bias(tmp_path, layer, value):
    loaded = _load(tmp_path, zoo, "bert")
    norm = loaded.model.encoder.layer[layer - 1].output.LayerNorm
    with torch.no_grad():
        norm.weight[D] = 0.0
        norm.bias[D] = value
    card = _card(loaded, state=layer)
    _assert_sums(card)
    assert np.allclose(card.values, value, atol=1e-5)
    path = f"encoder.layer.{layer - 1}.output.LayerNorm"
    (bias,) = _rows(card, component="norm bias", norm=path)
    assert bias["mean"] == pytest.approx(value, abs=1e-5)
    others = [r for r in card.contributions if r.get("norm") != path]
    assert max(abs(r["mean"]) for r in others) < 1e-5
    (reader,) = [r for r in card.readers if r["norm"] == path]
    assert reader["gamma"] == 0.0 and reader["beta"] == pytest.approx(value)


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_readers_report_a_planted_norm_weight(tmp_path, family):
    loaded = _load(tmp_path, zoo, family)
    from isoscope.engine.arch import wiring

    norm = next(n for n in wiring(loaded).norms if n.layer == 1)
    module = dict(loaded.model.named_modules())[norm.path]
    with torch.no_grad():
        module.weight[D] = 7.0 - norm.gamma_offset
    card = _card(loaded, state=1)
    (reader,) = [r for r in card.readers if r["norm"] == norm.path]
    assert reader["gamma"] == pytest.approx(7.0)
    assert reader["projections"], "the norm feeds projections"
    assert all(p["ratio"] > 1 for p in reader["projections"])  # 7 x a random column vs |gamma|~1


@pytest.mark.parametrize("value", [30.0, -4.0])
def test_ssm_mixer_is_the_token_mixer(tmp_path, value):
    loaded = _load(tmp_path, zoo_recent, "mamba", use_bias=True)
    _plant_bias(loaded.model.layers[0].mixer.out_proj, value)
    card = _card(loaded, state=1)
    _assert_sums(card)
    (mixer,) = _rows(card, layer=1, component="mixer")
    assert mixer["mean"] == pytest.approx(value, abs=1e-4)


def test_moe_splits_by_expert(tmp_path):
    loaded = _load(tmp_path, zoo, "mixtral")
    block = loaded.model.layers[0]
    kept = 2
    with torch.no_grad():
        block.self_attn.o_proj.weight[D].zero_()  # the attention writes nothing at D
        for e in range(block.mlp.experts.down_proj.shape[0]):
            if e != kept:
                block.mlp.experts.down_proj[e, D].zero_()
    card = _card(loaded, state=1)
    _assert_sums(card)
    with torch.no_grad():  # independent: what layer 1 adds at D, from the hidden states alone
        enc = loaded.tokenizer(TEXTS, padding=True, return_tensors="pt")
        out = loaded.encoder(**enc, output_hidden_states=True)
        mask = enc["attention_mask"].bool()
        added = (out.hidden_states[1] - out.hidden_states[0])[..., D][mask]
    experts = _rows(card, layer=1, component="expert")
    assert len(experts) == block.mlp.experts.down_proj.shape[0]
    by_index = {r["expert"]: r["mean"] for r in experts}
    assert by_index[kept] == pytest.approx(float(added.mean()), abs=1e-5)
    assert all(abs(m) < 1e-6 for e, m in by_index.items() if e != kept)
    assert by_index[kept] != 0


def test_direction_and_offset(tmp_path):
    loaded = _load(tmp_path, zoo, "llama")
    u = np.random.default_rng(0).normal(size=loaded.info.hidden_size)
    card = dimension_card(
        loaded, TEXTS, DimensionSettings(state=1, direction=u, offset=2.5, ablation_texts=0)
    )
    _assert_sums(card)
    (offset,) = _rows(card, component="offset")
    assert offset["mean"] == 2.5
    assert card.dim is None


def test_where_it_shows_and_ablation(tmp_path):
    loaded = _load(tmp_path, zoo, "llama", tie_word_embeddings=True)
    card = _card(loaded, state=1, ablation_texts=2, controls=2, top_k=3)
    assert [t["end"] for t in card.top_tokens] == ["high"] * 3 + ["low"] * 3
    assert card.top_tokens[0]["value"] >= card.top_tokens[1]["value"]
    assert "[[" in card.top_tokens[0]["context"]
    assert sum(card.histogram["counts"]) == card.n_tokens
    kinds = {k["kind"]: k["count"] for k in card.by_kind}
    assert kinds["first position"] == len(TEXTS)
    assert kinds["frequent"] + kinds["rare"] + kinds["special"] == card.n_tokens
    assert len(card.by_state) == loaded.info.num_layers + 1
    assert card.ablation["texts"] == 2 and len(card.ablation["controls"]) == 2
    assert card.ablation["metric"] == "next-token loss"
    assert card.logit_effect is not None and len(card.logit_effect["promotes"]) == 3
