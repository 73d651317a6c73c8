"""The evaluation (per-site error and end metric per scheme) leaves the model as it was even when
the forward pass fails, and refuses STS pairs for a decoder."""

from __future__ import annotations

import pytest
import torch

from backend.analysis.quant.readiness import analyse, quantized_state, scan_sites
from backend.engine.models import load_model
from tests.quant_checks import TEXTS, no_hooks, snapshot


def test_weights_restored_when_the_forward_fails(tiny_tied_llama_dir):
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    scan = scan_sites(loaded, TEXTS[:2], max_length=16, error_tokens=10, end_tokens=20)
    before = snapshot(loaded.model)
    scan.end_ids = torch.full_like(scan.end_ids, 10**9)  # an out-of-range id: the forward raises
    with pytest.raises(IndexError):
        quantized_state(loaded, scan, "smoothquant")
    assert no_hooks(loaded.model)
    assert all(torch.equal(before[k], v) for k, v in snapshot(loaded.model).items())


def test_pairs_are_refused_for_a_decoder(tiny_llama_dir):
    from backend.analysis.geometry.similarity import sts_sample
    from backend.engine.errors import InputError

    loaded = load_model(str(tiny_llama_dir), device="cpu")
    with pytest.raises(InputError, match="decoder"):
        analyse(loaded, TEXTS[:2], max_length=16, sensitivity=False, pairs=sts_sample())
