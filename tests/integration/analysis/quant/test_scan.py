"""The pass over the corpus on a tiny random Llama: the token sample stands for every token, and
the streamed per-channel maxima bound the sampled inputs."""

from __future__ import annotations

import pytest
import torch

from backend.analysis.quant.readiness import scan_sites
from backend.engine.models import load_model
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
