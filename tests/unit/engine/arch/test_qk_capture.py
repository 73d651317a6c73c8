"""qk_capture on synthetic tensors and a bare tiny Llama: masks read right, fused projections split
the way their layouts say, the model's own rotary embedding turned forward and back, and the
attention implementation restored after a capture."""

from __future__ import annotations

import pytest
import torch

from isoscope.engine.arch.qk_capture import (
    QKLayout,
    allowed_keys,
    attention_calls,
    rotate,
    split_projection,
    uses_attention_interface,
)
from isoscope.engine.errors import UnsupportedModelError


def _llama(**overrides):
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        **overrides,
    )
    return LlamaModel(config).eval()


def test_allowed_keys_reads_additive_and_boolean_masks():
    low = torch.finfo(torch.float32).min
    additive = torch.tensor([[[[0.0, low], [0.0, 0.0]]]])
    assert allowed_keys(additive).tolist() == [[[[True, False], [True, True]]]]
    boolean = torch.tensor([[[[True, False], [True, True]]]])
    assert allowed_keys(boolean) is boolean
    assert allowed_keys(None) is None


def test_fused_layouts_split_into_heads():
    b, t, h, d = 2, 3, 4, 5
    q, k, v = (torch.randn(b, t, h * d) for _ in range(3))
    thirds = split_projection(QKLayout("x", "f", "thirds"), None, torch.cat([q, k, v], -1), d)
    assert torch.equal(thirds[0], q.view(b, t, h, d).transpose(1, 2))
    assert torch.equal(thirds[1], k.view(b, t, h, d).transpose(1, 2))
    per_head = torch.cat([x.view(b, t, h, d) for x in (q, k, v)], -1).reshape(b, t, -1)
    split = split_projection(QKLayout("x", "f", "per_head"), None, per_head, d)
    assert torch.equal(split[0], q.view(b, t, h, d).transpose(1, 2))
    assert torch.equal(split[1], k.view(b, t, h, d).transpose(1, 2))


def test_rotation_by_the_models_own_function_round_trips_and_rotates():
    model = _llama()
    attention = model.layers[0].self_attn
    ids = torch.arange(6)[None]
    cos, sin = model.rotary_emb(torch.zeros(1, 6, 32), ids)
    q = torch.zeros(1, 4, 6, 8, dtype=torch.float64)
    q[..., 0] = 1.0  # e_0 at every position: turns by m * inv_freq[0] = m radians
    k = q[:, :2].clone()
    turned, _ = rotate(attention, q, k, (cos, sin), inverse=False)
    m = torch.arange(6, dtype=torch.float64)
    assert torch.allclose(turned[0, 0, :, 0], torch.cos(m), atol=1e-6)
    assert torch.allclose(turned[0, 0, :, 4], torch.sin(m), atol=1e-6)  # rotate_half's partner
    back, _ = rotate(attention, turned, k, (cos, sin), inverse=True)
    assert torch.allclose(back, q, atol=1e-6)


def test_rotation_without_cos_sin_is_refused_in_one_line():
    attention = _llama().layers[0].self_attn
    q = torch.zeros(1, 4, 2, 8, dtype=torch.float64)
    with pytest.raises(UnsupportedModelError, match="other rotation setting"):
        rotate(attention, q, q[:, :2], None, inverse=True)


def test_capture_records_every_layer_with_gqa_keys_and_restores_the_implementation():
    model = _llama(sliding_window=None)
    before = model.config._attn_implementation
    assert uses_attention_interface(model)
    calls = []
    ids = torch.tensor([[3, 4, 5, 6, 7]])
    with attention_calls(model, calls.append), torch.inference_mode():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert [c.layer for c in calls] == [0, 1]
    assert calls[0].q.shape == (1, 4, 5, 8) and calls[0].k.shape == (1, 2, 5, 8)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(calls[0].allowed[0, 0], causal)  # the model's own causal mask
    assert torch.allclose(calls[0].weights.sum(-1), torch.ones(1, 4, 5, dtype=torch.float64))
    assert calls[0].position_embeddings is not None
    assert model.config._attn_implementation == before


def test_a_scaled_rotation_is_undone_by_its_own_scale():
    """YaRN-style (cos, sin) carry an attention factor s: 'before' divides it out again."""
    model = _llama()
    attention = model.layers[0].self_attn
    cos, sin = model.rotary_emb(torch.zeros(1, 5, 32), torch.arange(5)[None])
    scaled = (1.5 * cos, 1.5 * sin)
    q = torch.randn(1, 4, 5, 8, dtype=torch.float64)
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    turned_q, turned_k = rotate(attention, q, k, scaled, inverse=False)
    assert torch.allclose(turned_q.norm(dim=-1), 1.5 * q.norm(dim=-1))
    back_q, back_k = rotate(attention, turned_q, turned_k, scaled, inverse=True)
    assert torch.allclose(back_q, q) and torch.allclose(back_k, k)


def test_a_scale_folded_into_the_queries_is_undone():
    from types import SimpleNamespace

    from isoscope.engine.arch.qk_capture import query_scale

    assert query_scale(SimpleNamespace(scaling=0.25), 1.0) == 4.0  # OPT / BART: q * scaling
    assert query_scale(SimpleNamespace(scaling=0.25), 0.25) == 1.0  # scaled at the call
    assert query_scale(SimpleNamespace(), 1.0) == 1.0  # T5: no scaling at all
