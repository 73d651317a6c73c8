"""The pass over the corpus on a tiny random Llama: the token sample stands for every token, and
the streamed per-channel maxima bound the sampled inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.quant.readiness import scan_sites
from isoscope.engine.load.models import load_model
from tests.quant_checks import TEXTS, no_hooks


def test_sample_weights_sum_to_the_corpus_and_act_max_bounds_the_sample(tiny_tied_llama_dir):
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    scan = scan_sites(loaded, TEXTS, max_length=32, error_tokens=12, end_tokens=30)
    assert no_hooks(loaded.model)
    assert float(scan.sample_weights.sum()) == pytest.approx(scan.n_tokens)
    for s in scan.sites:
        assert s.sample.shape == (scan.error_tokens, s.site.width)
        assert torch.all(s.sample.abs().amax(0) <= s.act_max + 1e-6)
        assert s.max_abs == pytest.approx(float(s.act_max.max()))
    assert scan.end_tokens <= 30 and scan.end_reference.shape[:2] == scan.end_mask.shape


def test_end_texts_spread_over_texts_on_a_causal_model_only():
    from isoscope.analysis.quant.readiness.scan import MIN_END_TEXTS, _end_texts

    lengths = np.array([128] * 20 + [0, 5])
    rows, keep = _end_texts(lengths, 256, causal=False)  # whole texts: 2 of them
    assert rows.tolist() == [0, 1] and keep.tolist() == [128, 128]
    rows, keep = _end_texts(lengths, 256, causal=True)  # 8 texts, 32 tokens each
    assert rows.tolist() == list(range(MIN_END_TEXTS)) and keep.tolist() == [32] * MIN_END_TEXTS
    rows, keep = _end_texts(np.array([3, 0, 4, 5]), 256, causal=True)  # all fit whole
    assert rows.tolist() == [0, 2, 3] and keep.tolist() == [3, 4, 5]


def test_the_end_reference_on_cut_texts_is_the_model_on_those_prefixes(tiny_tied_llama_dir):
    """A causal model's states on a prefix are its states on the whole text: the cut end texts'
    reference equals a forward of the prefixes alone."""
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    scan = scan_sites(loaded, TEXTS, max_length=32, error_tokens=12, end_tokens=16)
    assert scan.end_ids.shape[0] == min(8, len(TEXTS))
    with torch.inference_mode():
        for k in range(scan.end_ids.shape[0]):
            n = int(scan.end_mask[k].sum())
            out = loaded.encoder(input_ids=scan.end_ids[k : k + 1, :n])
            state = out.last_hidden_state[0].float()
            assert torch.allclose(state, scan.end_reference[k, :n], atol=1e-4)
