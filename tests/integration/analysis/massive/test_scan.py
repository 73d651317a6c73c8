"""The scan over a corpus (backend/analysis/massive/scan.py): massive activations, sinks and int8
features on tiny random checkpoints loaded through the loader."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.scan import scan_massive
from isoscope.engine.extraction import tokenize
from isoscope.engine.load.models import load_model
from tests.integration.analysis.massive.helpers import TEXTS


def test_scan_shapes_and_first_position_included(llama):
    scan = scan_massive(llama, TEXTS, max_length=32)
    lengths = tokenize(llama, TEXTS, 32).lengths
    assert scan.n_tokens == int(lengths.sum()) and scan.n_texts == len(TEXTS)
    m = scan.massive
    assert m.top_value.shape == (3, 3) and m.state_names == ("emb", "1", "2")
    assert (np.diff(m.top_value, axis=1) <= 0).all()  # descending
    assert ((m.top_position >= 0) & (m.top_position < lengths[m.top_text])).all()
    assert scan.sinks is not None and scan.sinks.alpha.shape == (2, 4)
    assert ((scan.sinks.alpha > 0) & (scan.sinks.alpha <= 1)).all()
    assert scan.int8 is not None
    assert scan.int8.site_names == (
        "L1.pre_attn_ln",
        "L1.pre_mlp_ln",
        "L2.pre_attn_ln",
        "L2.pre_mlp_ln",
    )
    assert llama.encoder.config._attn_implementation != "eager" or scan.notes == ()


def test_batching_does_not_change_the_result(llama):
    one = scan_massive(llama, TEXTS, max_length=32, batch_size=1)
    many = scan_massive(llama, TEXTS, max_length=32, batch_size=8)
    np.testing.assert_allclose(one.massive.top_value, many.massive.top_value, rtol=1e-5)
    np.testing.assert_array_equal(one.massive.top_dim, many.massive.top_dim)
    # texts tie at position 0 of a causal model (it sees only itself): compare positions, not texts
    np.testing.assert_array_equal(one.massive.top_position, many.massive.top_position)
    np.testing.assert_allclose(one.massive.median_abs, many.massive.median_abs, rtol=1e-6)
    np.testing.assert_allclose(one.sinks.alpha, many.sinks.alpha, rtol=1e-5)


def test_planted_massive_activation_at_the_first_token(llama):
    first_id = int(tokenize(llama, TEXTS, 32).input_ids[0][0])  # [CLS] starts every text
    with torch.no_grad():
        llama.encoder.embed_tokens.weight[first_id, 5] = 500.0
    scan = scan_massive(llama, TEXTS, max_length=32)
    m = scan.massive
    for s in (0, 1):  # emb and layer 1 (the residual carries it; the last state is normed)
        assert m.top_dim[s, 0] == 5 and m.top_position[s, 0] == 0
        assert m.top_value[s, 0] > 400
        assert m.n_massive[s] == len(TEXTS)
        assert m.carriers[s]["first"] == len(TEXTS) and m.carriers[s]["other"] == 0
    assert m.top_value[0, 0] == pytest.approx(500.0)
    assert m.ratio[0] > 1000


def test_zero_queries_and_keys_give_the_harmonic_alpha(llama):
    for layer in llama.encoder.layers:
        with torch.no_grad():
            layer.self_attn.q_proj.weight.zero_()
            layer.self_attn.k_proj.weight.zero_()
    lengths = tokenize(llama, TEXTS, 32).lengths
    expected = np.mean([sum(1 / (i + 1) for i in range(t)) / t for t in lengths])
    scan = scan_massive(llama, TEXTS, max_length=32, int8=False)
    np.testing.assert_allclose(scan.sinks.alpha, expected, rtol=1e-6)
    assert scan.int8 is None


def test_planted_norm_gain_makes_an_outlier_feature(llama):
    for layer in llama.encoder.layers:
        with torch.no_grad():
            layer.input_layernorm.weight[3] = 100.0
            layer.post_attention_layernorm.weight[3] = 100.0
    scan = scan_massive(llama, TEXTS, max_length=32, sinks=False)
    assert scan.sinks is None
    assert scan.int8.outlier_features == (3,)
    assert scan.int8.ranked_dims()[0] == {"dim": 3, "site_share": 1.0}


def test_sinks_on_an_encoder_measure_attention_to_cls(tiny_bert_dir):
    bert = load_model(str(tiny_bert_dir), device="cpu")
    for layer in bert.encoder.encoder.layer:
        attn = layer.attention.self
        with torch.no_grad():
            for proj in (attn.query, attn.key):
                proj.weight.zero_()
                proj.bias.zero_()
    lengths = tokenize(bert, TEXTS, 32).lengths
    scan = scan_massive(bert, TEXTS, max_length=32)
    assert scan.sinks is not None, scan.notes
    np.testing.assert_allclose(scan.sinks.alpha, np.mean(1 / lengths), rtol=1e-6)
    # the embedding LayerNorm's output is the input of layer 1's q/k/v: the first site
    assert scan.int8 is not None and scan.int8.site_names[:2] == ("emb.ln", "L1.attn_ln")


def test_random_like_copy_of_a_llama_loads(tiny_llama_dir):
    copy = load_model(f"random-like:{tiny_llama_dir}", device="cpu")
    assert copy.info.model_type == "llama" and copy.info.random_init
    assert copy.info.is_causal
