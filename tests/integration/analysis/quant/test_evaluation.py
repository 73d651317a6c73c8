"""The evaluation (per-site error and end metric per scheme) leaves the model as it was even when
the forward pass fails, and refuses STS pairs for a decoder."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.quant.readiness import analyse, quantized_state, scan_sites
from isoscope.engine.load.models import load_model
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
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.pairs import sts_sample

    loaded = load_model(str(tiny_llama_dir), device="cpu")
    with pytest.raises(InputError, match="decoder"):
        analyse(loaded, TEXTS[:2], max_length=16, sensitivity=False, pairs=sts_sample())


def test_prefix_curve_ends_at_every_block_quantized(tiny_tied_llama_dir):
    """With k = all blocks, the layer-wise curve is the per-token scheme's end metric; with k = 1 it
    is block 0 alone, the sensitivity's first bar (the same fake quantization, one pass each)."""
    from isoscope.analysis.quant.readiness import evaluate, prefix_curve

    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    scan = scan_sites(loaded, TEXTS, max_length=24, error_tokens=16, end_tokens=40)
    ev = evaluate(loaded, scan, schemes=("per_token",))
    curve = prefix_curve(loaded, scan)
    assert no_hooks(loaded.model)
    assert [r["layers"] for r in curve] == [1, 2, 3]
    assert curve[-1]["end"] == pytest.approx(ev.end["per_token"], rel=1e-4, abs=1e-9)
    assert curve[0]["end"] == pytest.approx(ev.sensitivity[0]["end"], rel=1e-3, abs=1e-9)


@pytest.mark.parametrize("best", [0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
def test_the_alpha_walk_finds_the_grid_minimum_with_fewer_evaluations(best):
    from isoscope.analysis.quant.params import ALPHA_GRID
    from isoscope.analysis.quant.readiness.evaluation import descend

    calls = []

    def f(a: float) -> float:
        calls.append(a)
        return (a - best) ** 2

    seen = descend(ALPHA_GRID, f, 0.5)
    assert min(seen, key=seen.get) == best and len(calls) == len(seen) < len(ALPHA_GRID)
    flat = descend(ALPHA_GRID, lambda a: 1.0, 0.5)  # a flat error: no step is downhill
    assert sorted(flat) == [0.4, 0.5, 0.6]  # the start and both neighbours, then it stops
