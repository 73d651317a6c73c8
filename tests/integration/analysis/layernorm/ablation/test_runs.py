"""run_ablation on saved checkpoints: MLM loss vs a hand computation, GPT-2 pre-LN norms, STS vs a
direct computation, and BERT Busters on MiniLM."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.layernorm.ablation import ablated, mask_tokens, run_ablation
from isoscope.analysis.layernorm.params import ln_outliers, norms_of
from isoscope.engine.extraction import tokenize
from isoscope.engine.load.models import load_model


@pytest.fixture(scope="module")
def tiny_mlm(tiny_bert_mlm_dir):
    return load_model(str(tiny_bert_mlm_dir), device="cpu", head="mlm")


def hand_mlm_loss(loaded, texts, seed=0):
    """Per text: logits of the masked input -> cross-entropy at the masked positions; token mean."""
    tok = tokenize(loaded, tuple(texts), 128)
    masked = mask_tokens(tok, loaded.tokenizer.mask_token_id, 0.15, seed)
    total, count = 0.0, 0
    with torch.no_grad():
        for ids, labels in zip(masked.input_ids, masked.labels, strict=True):
            logits = loaded.model(input_ids=torch.from_numpy(ids)[None]).logits[0].double()
            where = np.flatnonzero(labels >= 0)
            log_probs = torch.log_softmax(logits[where], dim=-1)
            total += float(
                -log_probs[torch.arange(len(where)), torch.from_numpy(labels[where])].sum()
            )
            count += len(where)
    return total / count


def test_mlm_loss_equals_hand_computation(tiny_mlm, bundled):
    texts = bundled.texts[:12]
    assert tiny_mlm.info.has_mlm_head and norms_of(tiny_mlm)[-1].name == "head.ln"
    report = run_ablation(
        tiny_mlm, texts, [3, 11], norms=["out", "head"], random_controls=1, batch_size=5
    )
    assert report.mlm_loss_original == pytest.approx(hand_mlm_loss(tiny_mlm, texts), rel=1e-6)
    with ablated(tiny_mlm, [3, 11], ["out", "head"]):
        expected = hand_mlm_loss(tiny_mlm, texts)
    assert report.effect.mlm_loss == pytest.approx(expected, rel=1e-6)
    assert report.effect.mlm_loss != pytest.approx(report.mlm_loss_original, rel=1e-9)
    assert report.norms == ["L1.out_ln", "L2.out_ln", "head.ln"]


def test_gpt2_checkpoint_ablates_its_pre_ln_norms(tiny_gpt2_dir, bundled):
    loaded = load_model(str(tiny_gpt2_dir), device="cpu")
    report = run_ablation(loaded, bundled.texts[:6], [0, 1], random_controls=1)
    assert report.norms == ["L1.pre_attn_ln", "L1.pre_mlp_ln", "L2.pre_attn_ln", "L2.pre_mlp_ln"]
    assert (
        report.effect.embedding_cosine[0] == pytest.approx(1.0)
        and report.effect.embedding_cosine[-1] < 1
    )


def test_minilm_outlier_dims_move_embeddings_more_than_random_dims(minilm, bundled):
    found = ln_outliers(minilm)
    assert {127, 223} <= set(found.dims)  # MiniLM's LayerNorm outliers (docs/methods.md)
    report = run_ablation(minilm, bundled.texts[:24], found.dims, random_controls=3, max_length=64)
    final = report.effect.embedding_cosine[-1]
    controls = report.control_values("embedding_cosine")[:, -1]
    assert (final < controls).all(), (final, controls)
    # and clearly so: the drift (1 - cosine) is several times the largest control drift
    assert 1 - final > 2 * (1 - controls.min())
    assert report.mlm_loss_original is None


def test_sts_spearman_matches_direct_computation(tiny_bert_dir):
    from isoscope.analysis.similarity import cosine_rows, spearman100
    from isoscope.engine.extraction import mean_pooled
    from isoscope.engine.inputs.pairs import sts_sample

    loaded = load_model(str(tiny_bert_dir), device="cpu")
    pairs = sts_sample()
    left, right, gold = list(pairs.sentence1[:20]), list(pairs.sentence2[:20]), pairs.scores[:20]
    report = run_ablation(loaded, left[:6], [4], random_controls=1, pairs=(left, right, gold))
    a, b = mean_pooled(loaded, left), mean_pooled(loaded, right)
    direct = [spearman100(cosine_rows(a[s], b[s]), gold) for s in range(a.shape[0])]
    np.testing.assert_allclose(report.sts_spearman_original, direct, atol=1e-6)
    assert report.effect.sts_spearman.shape == (3,) and report.controls[0][
        1
    ].sts_spearman.shape == (3,)
