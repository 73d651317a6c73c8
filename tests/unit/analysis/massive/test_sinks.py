"""Attention sinks (Xiao et al. 2023; Gu et al. 2024's alpha and sink share) on planted attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.sinks import (
    SinkAccumulator,
    eager_attention,
    sink_alpha,
    sink_share,
)


def _causal_uniform(b: int, h: int, t: int) -> torch.Tensor:
    """Causal attention spread evenly over the visible keys: A[i, j] = 1 / (i + 1) for j <= i."""
    rows = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
    return rows.expand(b, h, t, t).clone()


def _planted_sink(b: int, h: int, t: int, head: int, weight: float = 0.9) -> torch.Tensor:
    """Head ``head`` puts ``weight`` on key 0 from every query after the first."""
    attn = _causal_uniform(b, h, t)
    sink = torch.zeros(t, t)
    sink[:, 0] = weight
    for i in range(1, t):
        sink[i, 1 : i + 1] = (1 - weight) / i
    sink[0, 0] = 1.0
    attn[:, head] = sink
    return attn


def test_uniform_causal_attention_gives_the_harmonic_mean():
    t = 8
    alpha = sink_alpha(_causal_uniform(1, 2, t), torch.tensor([t]))
    expected = sum(1 / (i + 1) for i in range(t)) / t  # (1/T) sum_i A[i, 0]
    np.testing.assert_allclose(alpha.numpy(), expected)


def test_planted_sink_head_is_found():
    t = 11
    alpha = sink_alpha(_planted_sink(2, 4, t, head=2), torch.tensor([t, t]))
    assert alpha[0, 2].item() == pytest.approx((1 + 0.9 * (t - 1)) / t)
    assert alpha[0, 2] > 0.3
    assert (alpha[:, [0, 1, 3]] < 0.3).all()


def test_padded_queries_are_ignored():
    t = 6
    attn = _causal_uniform(2, 1, t)
    attn[1, :, 3:, :] = 0.0  # text 1 has 3 tokens; its padded rows hold garbage
    attn[1, :, 3:, 0] = 1.0
    alpha = sink_alpha(attn, torch.tensor([t, 3]))
    assert alpha[1, 0].item() == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_later_key_position_uses_the_queries_that_see_it():
    t = 5
    alpha = sink_alpha(_causal_uniform(1, 1, t), torch.tensor([t]), key=2)
    assert alpha.item() == pytest.approx((1 / 3 + 1 / 4 + 1 / 5) / 3)


def test_share_per_layer_and_overall():
    alpha = np.array([[0.9, 0.1, 0.31, 0.3], [0.0, 0.0, 0.0, 0.0]])
    per_layer, share = sink_share(alpha)
    np.testing.assert_allclose(per_layer, [0.5, 0.0])  # 0.3 itself is not > 0.3
    assert share == pytest.approx(0.25)


def test_accumulator_averages_alpha_over_texts():
    t = 20  # uniform causal attention gives H_T / T: 0.18 at T = 20 (but 0.31 at T = 9)
    acc = SinkAccumulator()
    layer0 = _planted_sink(3, 2, t, head=0)
    layer1 = _causal_uniform(3, 2, t)
    acc.update([layer0, layer1], torch.tensor([t, t, t]))
    acc.update([layer0[:1], layer1[:1]], torch.tensor([t]))
    stats = acc.finish()
    assert stats.alpha.shape == (2, 2) and stats.n_texts == 4
    assert stats.alpha[0, 0] == pytest.approx((1 + 0.9 * (t - 1)) / t)
    np.testing.assert_allclose(stats.share_per_layer, [0.5, 0.0])
    assert stats.share == pytest.approx(0.25)
    assert set(stats.to_dict()) == {
        "layers",
        "alpha",
        "share_per_layer",
        "share",
        "no_attention_layers",
    }
    assert stats.to_dict()["layers"] == [1, 2]  # every layer when none is named


def test_eager_attention_is_restored_after_the_block():
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=50,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        attn_implementation="sdpa",
    )
    model = LlamaModel(config).eval()
    assert model.config._attn_implementation == "sdpa"
    ids = torch.tensor([[1, 2, 3, 4]])
    with eager_attention(model):
        assert model.config._attn_implementation == "eager"
        out = model(input_ids=ids, output_attentions=True)
        assert out.attentions[0].shape == (1, 2, 4, 4)
        torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(1, 2, 4))
    assert model.config._attn_implementation == "sdpa"
    with pytest.raises(RuntimeError), eager_attention(model):
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"


def test_attention_weights_are_matched_to_the_attention_layers():
    from isoscope.analysis.massive.sinks import attention_weights_of

    a2, a4 = _causal_uniform(2, 3, 5), _planted_sink(2, 3, 5, head=1)
    other = torch.rand(2, 3, 16, 16)  # a linear-attention layer's own tensor (block weights)
    # a hybrid returns one tensor per attention layer ...
    assert attention_weights_of((a2, a4), (2, 4), 4, 5) == [a2, a4]
    # ... or one per layer (MiniMax): the attention layers' are picked
    picked = attention_weights_of((other, a2, other, a4), (2, 4), 4, 5)
    assert picked == [a2, a4]
    # no match, or not (B, H, T, T) weights of this batch (RWKV's (B, T, d) states): None
    assert attention_weights_of((a2,), (2, 4), 4, 5) is None
    assert attention_weights_of((torch.rand(2, 5, 64),) * 2, (2, 4), 4, 5) is None
    assert attention_weights_of(None, (1,), 1, 5) is None


def test_sink_rows_carry_their_layer_numbers():
    acc = SinkAccumulator(layers=(2, 4), other_layers={1: "Mamba-2", 3: "Mamba-2"})
    acc.update([_planted_sink(1, 2, 6, head=0), _causal_uniform(1, 2, 6)], torch.tensor([6]))
    stats = acc.finish()
    assert stats.layer_numbers == (2, 4) and stats.alpha.shape == (2, 2)
    out = stats.to_dict()
    assert out["layers"] == [2, 4] and out["no_attention_layers"] == {
        "1": "Mamba-2",
        "3": "Mamba-2",
    }
