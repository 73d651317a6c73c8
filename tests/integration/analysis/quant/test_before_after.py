"""Before/after SmoothQuant and the rotation on a tiny random Llama, through the planted limits of
the smoothing formula: at α = 0 every weight column ends at the same max (s_j = 1 / max|W_j|), at
α = 1 every activation channel ends at or below 1 (s_j = max|X_j|, the corpus max)."""

from __future__ import annotations

import math

import pytest

from isoscope.analysis.quant.before_after import before_after, channel_profile
from isoscope.analysis.quant.readiness import scan_sites
from isoscope.engine.load.models import load_model
from tests.quant_checks import TEXTS, no_hooks


@pytest.fixture(scope="module")
def scanned(tiny_tied_llama_dir):
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    return loaded, scan_sites(loaded, TEXTS, max_length=24, error_tokens=24, end_tokens=24)


def test_alpha_zero_evens_the_weight_columns_and_one_the_activations(scanned):
    loaded, scan = scanned
    at_zero = before_after(loaded, scan, alpha=0.0)
    at_one = before_after(loaded, scan, alpha=1.0)
    assert no_hooks(loaded.model)
    for zero, one in zip(at_zero, at_one, strict=True):
        assert zero["smoothquant"].weight_column_max_over_median == pytest.approx(1.0, rel=1e-5)
        assert one["smoothquant"].act_share_ge_6 == 0.0  # every |x'| <= 1
        assert zero["before"] == one["before"]  # the untransformed side does not depend on α
        assert math.isfinite(zero["rotation"].act_kurtosis)
        assert zero["rotation"].act_int8_error >= 0 and zero["rotation"].weight_int8_error >= 0


def test_channel_profile_moves_the_outlier_channels_range_into_the_weight_columns(scanned):
    """Per channel, SmoothQuant at α divides x_j by s_j and multiplies W's column j by it, so
    the products act x weight are unchanged channel by channel; the rotation is orthonormal, so
    every token row keeps its norm (the per-channel max can only be spread, never exceed it)."""
    import numpy as np
    import torch

    from isoscope.analysis.quant.schemes import smooth_scales

    loaded, scan = scanned
    index = max(range(len(scan.sites)), key=lambda i: scan.sites[i].max_over_median)
    smooth = channel_profile(loaded, scan, index, "smoothquant", alpha=0.6)
    s = scan.sites[index]
    w = torch.cat(
        [p.weight.detach().float() for p in (loaded.encoder.get_submodule(n) for n in s.site.paths)]
    )
    scale = smooth_scales(s.act_max.float(), w, 0.6).double().numpy()
    assert np.allclose(smooth.act_after, smooth.act_before / scale, rtol=1e-5)
    assert np.allclose(smooth.weight_after, smooth.weight_before * scale, rtol=1e-5)
    assert smooth.act_before.max() / np.median(smooth.act_before) >= (
        smooth.act_after.max() / np.median(smooth.act_after)
    )  # smoothing evens the activation channels
    rotated = channel_profile(loaded, scan, index, "rotation")
    row_norm = float(s.sample.float().norm(dim=1).max())
    assert rotated.act_after.max() <= row_norm + 1e-4
    assert rotated.act_before.shape == rotated.act_after.shape == (s.site.width,)
    with pytest.raises(ValueError, match="unknown transform"):
        channel_profile(loaded, scan, index, "nonsense")
