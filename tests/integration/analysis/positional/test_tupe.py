"""TUPE decomposition (Ke et al. 2021, eq. 6): the four terms plus the remainder add up to the
model's real first-layer logits, on tiny random BERT / GPT-2 checkpoints and on the default model."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.positional.tupe import (
    REGIONS,
    TERMS,
    decompose_text,
    supports_tupe,
    tupe_summary,
)
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.load.models import load_model

TEXTS = (
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog near the river bank.",
    "Hello!",
)


@pytest.mark.parametrize("fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_terms_sum_to_the_real_logits_on_tiny_models(fixture, request):
    loaded = load_model(str(request.getfixturevalue(fixture)), device="cpu")
    one = decompose_text(loaded, TEXTS[1])
    heads, seq = loaded.info.num_heads, len(one.tokens)
    assert one.real.shape == (heads, seq, seq)
    assert set(one.terms) == {*TERMS, "remainder"}
    assert one.ln_error < 1e-5  # the LayerNorm split reproduces the real LN output
    assert one.max_abs_error < 1e-6 * max(1.0, float(np.abs(one.real).max()))
    # Each term matters: dropping any of them breaks the sum.
    for name in TERMS:
        partial = one.total - one.terms[name]
        assert np.abs(partial - one.real)[:, one.valid].max() > 100 * one.max_abs_error
    if fixture == "tiny_gpt2_dir":
        assert not one.valid[0, 1] and one.valid[1, 0]  # causal: only j <= i is attended


def test_summary_on_the_default_model(minilm, bundled):
    summary = tupe_summary(minilm, bundled.texts, max_length=64, max_texts=12)
    assert summary.num_heads == 12 and summary.num_texts == 12
    # float32 model, float64 decomposition: the self-test error is float32 rounding of q and k.
    assert summary.max_abs_error < 1e-4
    assert summary.max_abs_error < 1e-5 * summary.max_abs_logit
    for region in REGIONS:
        share = summary.term_share(region)
        assert set(share) == set(TERMS)
        assert sum(share.values()) == pytest.approx(1.0)
    # Trained MiniLM: position-position is the largest term over all pairs (measured ~0.56).
    share = summary.term_share()
    assert share["position_position"] == max(share.values())
    assert summary.head_share().shape == (12, 4)
    payload = summary.to_dict()
    assert payload["max_abs_error"] == summary.max_abs_error
    assert payload["first_token_is"] == "[CLS]"


def test_models_without_a_position_table_are_refused():
    loaded = load_model("random:bert-nope:layers=1,width=32,heads=2", device="cpu")
    assert supports_tupe(loaded) is not None
    with pytest.raises(UnsupportedModelError, match="absolute position table"):
        tupe_summary(loaded, TEXTS)
