"""Queries and keys on rotary and grouped-query attention, through the real loader: tiny Llama
(GQA), Qwen3 (q/k norms), GPT-NeoX (fused query_key_value, partial rotary) and Mistral (sliding
window). Planted signals: biases that fix every query and key prove the GQA pairing and the
rotation; zero queries make attention uniform over exactly the keys the mask allows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.positional.qk import qk_stats
from isoscope.engine.load.models import load_model
from tests.tiny_decoders import save_tiny_decoder

TEXTS = ["the cat sat on the mat today", "a dog", "one more text that is longer than the others"]


@pytest.fixture(scope="module")
def llama(tiny_llama_dir):
    return load_model(str(tiny_llama_dir), device="cpu")


def _load(tmp_path_factory, name, config_name, model_name, **overrides):
    import transformers

    folder = save_tiny_decoder(
        tmp_path_factory,
        name,
        getattr(transformers, config_name),
        getattr(transformers, model_name),
        **overrides,
    )
    return load_model(str(folder), device="cpu")


def _one_text_tokens(loaded, text: str) -> int:
    return len(loaded.tokenizer(text, truncation=True, max_length=64)["input_ids"])


def _recomputed_means(loaded, texts, max_length=64):
    """Mean pre-rotation q and k per layer from the module's weights: q_proj / k_proj (and the
    q/k norms where the attention has them) of the input norm's output of each layer's input."""
    enc = loaded.tokenizer(
        list(texts), return_tensors="pt", padding=True, truncation=True, max_length=max_length
    )
    model = loaded.encoder
    with torch.inference_mode():
        hidden = model(**enc, output_hidden_states=True).hidden_states
    valid = enc["attention_mask"].bool()
    means = []
    with torch.inference_mode():
        for i, layer in enumerate(model.layers):
            attn, x = layer.self_attn, layer.input_layernorm(hidden[i])
            q = attn.q_proj(x).view(*x.shape[:2], -1, attn.head_dim)
            k = attn.k_proj(x).view(*x.shape[:2], -1, attn.head_dim)
            if hasattr(attn, "q_norm"):
                q, k = attn.q_norm(q), attn.k_norm(k)
            means.append((q[valid].double().mean(0), k[valid].double().mean(0)))
    return means


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_captured_queries_equal_a_recomputation_from_the_weights(family, llama, tmp_path_factory):
    loaded = (
        llama
        if family == "llama"
        else _load(tmp_path_factory, "qk-qwen3", "Qwen3Config", "Qwen3Model", head_dim=8)
    )
    stats = qk_stats(loaded, TEXTS, rotation="before")
    assert stats.rotation == "before" and stats.kv_head.tolist() == [0, 0, 1, 1]
    for i, (mean_q, mean_k) in enumerate(_recomputed_means(loaded, TEXTS)):
        np.testing.assert_allclose(stats.mean_q_norm[i], mean_q.norm(dim=-1).numpy(), rtol=1e-4)
        expected_k = mean_k.norm(dim=-1).numpy()[stats.kv_head]
        np.testing.assert_allclose(stats.mean_k_norm[i], expected_k, rtol=1e-4)
        cos = torch.nn.functional.cosine_similarity(mean_q, mean_k[stats.kv_head], dim=-1)
        np.testing.assert_allclose(stats.cos_qk[i], cos.numpy(), rtol=1e-4, atol=1e-7)


def test_planted_biases_prove_the_gqa_pairing_and_the_rotation(tmp_path_factory):
    """q = e_{h // 2} and k = e_g for every token (weights zeroed, biases set): before rotation
    every query head is parallel to its own key head; after it, the mean of e_0 turned by m
    radians (inv_freq[0] = 1) has norm |sum_m e^{im}| / n."""
    loaded = _load(tmp_path_factory, "qk-planted", "LlamaConfig", "LlamaModel", attention_bias=True)
    with torch.no_grad():
        for layer in loaded.encoder.layers:
            attn = layer.self_attn
            for proj in (attn.q_proj, attn.k_proj):
                proj.weight.zero_()
                proj.bias.zero_()
            for h in range(4):
                attn.q_proj.bias[h * 8 + h // 2] = 1.0
            for g in range(2):
                attn.k_proj.bias[g * 8 + g] = 1.0
    text = [TEXTS[0]]
    before = qk_stats(loaded, text, rotation="before")
    np.testing.assert_allclose(before.cos_qk, 1.0, atol=1e-6)  # floor(h / 2) pairs h with e_h//2
    np.testing.assert_allclose(before.mean_q_norm, 1.0, atol=1e-6)
    applied = qk_stats(loaded, text, rotation="applied")
    n = _one_text_tokens(loaded, text[0])
    m = np.arange(n)
    expected = abs(np.exp(1j * m).sum()) / n
    np.testing.assert_allclose(applied.mean_q_norm[:, :2], expected, rtol=1e-5)
    np.testing.assert_allclose(applied.mean_k_norm[:, :2], expected, rtol=1e-5)
    assert expected < 0.5  # the rotated mean really is shorter than the unit pre-rotation one


def test_entropy_uses_the_models_causal_and_sliding_window_mask(tmp_path_factory):
    """Zero queries give uniform attention over the keys the mask allows: the entropy is the mean
    of log(number of keys), with min(m + 1, window) keys at position m."""
    loaded = _load(tmp_path_factory, "qk-window", "MistralConfig", "MistralModel", sliding_window=3)
    with torch.no_grad():
        for layer in loaded.encoder.layers:
            layer.self_attn.q_proj.weight.zero_()
    text = [TEXTS[2]]
    stats = qk_stats(loaded, text, rotation="applied")
    n = _one_text_tokens(loaded, text[0])
    keys = np.minimum(np.arange(n) + 1, 3)
    np.testing.assert_allclose(stats.entropy, np.log(keys).mean(), rtol=1e-6)
    np.testing.assert_allclose(stats.entropy_norm, 1.0, rtol=1e-6)
    assert "sliding window of 3" in stats.mask and "causal" in stats.mask


def test_gpt_neox_fused_partial_rotary(tmp_path_factory):
    loaded = _load(
        tmp_path_factory,
        "qk-neox",
        "GPTNeoXConfig",
        "GPTNeoXModel",
        rotary_pct=0.25,
        num_key_value_heads=None,
    )
    applied = qk_stats(loaded, TEXTS, rotation="applied")
    before = qk_stats(loaded, TEXTS, rotation="before")
    assert applied.kv_head.tolist() == [0, 1, 2, 3]
    assert (applied.rotation, before.rotation) == ("applied", "before")
    np.testing.assert_allclose(applied.entropy, before.entropy)  # the toggle moves q/k only
    assert not np.allclose(applied.mean_q_norm, before.mean_q_norm)
    frame = applied.frame()
    assert list(frame.columns[:4]) == ["model", "layer", "head", "kv_head"]


def test_falcon_fused_grouped_keys_are_paired_per_group(tmp_path_factory):
    """Falcon's new decoder architecture broadcasts its 2 key heads to the 4 query heads inside
    its own _split_heads; the view folds them back and pairs query head h with h // 2."""
    loaded = _load(
        tmp_path_factory,
        "qk-falcon",
        "FalconConfig",
        "FalconModel",
        new_decoder_architecture=True,
        num_kv_heads=2,
    )
    stats = qk_stats(loaded, TEXTS, rotation="applied")
    assert stats.kv_head.tolist() == [0, 0, 1, 1]
    assert stats.rotation == "applied" and "_split_heads" in stats.capture
    assert np.all(stats.entropy_norm > 0) and np.all(stats.entropy_norm <= 1 + 1e-9)


def test_opt_queries_are_the_projections_although_opt_prescales_them(tmp_path):
    """OPT multiplies q_proj's output by 1/sqrt(d_h) before its attention call (scaling 1.0);
    the view reports q_proj's own output, as for every other model (and as before the view read
    the attention call)."""
    from tests import zoo

    loaded = load_model(str(zoo.build("opt", tmp_path / "opt")), device="cpu")
    stats = qk_stats(loaded, TEXTS)
    enc = loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)
    decoder = loaded.encoder.decoder
    with torch.inference_mode():
        hidden = loaded.encoder(**enc, output_hidden_states=True).hidden_states
        valid = enc["attention_mask"].bool()
        for i, layer in enumerate(decoder.layers):
            q = layer.self_attn.q_proj(layer.self_attn_layer_norm(hidden[i]))[valid]
            mean_q = q.double().mean(0).view(-1, layer.self_attn.head_dim)
            np.testing.assert_allclose(stats.mean_q_norm[i], mean_q.norm(dim=-1), rtol=1e-4)
