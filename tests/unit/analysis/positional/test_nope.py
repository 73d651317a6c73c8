"""Variance lab (Chi et al. 2023): the 1/m law on random NoPE models, the flat bidirectional
contrast, the slope fit and the settings' validation."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.positional.nope import (
    NopeSettings,
    loglog_slope,
    theory_variance,
    variance_lab,
    variance_lab_pair,
)
from isoscope.engine.errors import InputError

SMALL = NopeSettings(d_model=128, layers=2, heads=4, seq_len=256, seeds=2, batch=2)


@pytest.fixture(scope="module")
def pair():
    return variance_lab_pair(SMALL)


def test_loglog_slope_recovers_a_power_law():
    m = np.arange(1, 501)
    assert loglog_slope(m, 3.0 * m**-1.0) == pytest.approx(-1.0, abs=1e-12)
    assert loglog_slope(m, 0.5 * m**-0.25, start=10) == pytest.approx(-0.25, abs=1e-12)
    assert loglog_slope(m, np.full(500, 2.0)) == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(loglog_slope(m[:1], m[:1] * 1.0))


def test_theory_line_formula():
    m = np.arange(1, 11)
    causal = theory_variance(64, 0.02, 0.005, m)
    assert causal[0] == pytest.approx(64 * 0.005**2 * 64 * 0.02**2)
    assert causal[9] == pytest.approx(causal[0] / 10)
    flat = theory_variance(64, 0.02, 0.005, m, bidirectional=True)
    assert np.allclose(flat, causal[0] / 10)


def test_first_layer_matches_the_theory_with_near_uniform_attention(pair):
    causal, _ = pair
    assert causal.causal
    # Layer 1: slope near -1, and the measured variance near d sigma_o^2 d sigma^2 / m at every scale.
    assert -1.2 <= causal.slopes[0] <= -0.7
    ratio = causal.attn_mean[0] / causal.theory
    assert 0.7 < np.exp(np.log(ratio).mean()) < 1.4
    for m in (1, 16, 256):
        assert 0.5 < ratio[m - 1] < 2.0, (m, ratio[m - 1])
    # The theory uses the model's measured init stds: GPT-2 draws c_proj with 0.02 / sqrt(2 n_layer).
    assert causal.weight_stds["sigma_value"] == pytest.approx(0.02, rel=0.05)
    assert causal.weight_stds["sigma_o"] == pytest.approx(
        0.02 / np.sqrt(2 * SMALL.layers), rel=0.05
    )
    # Deeper layers shrink more slowly, but still shrink.
    assert causal.slopes[0] < causal.slopes[1] < -0.05


def test_bidirectional_mask_is_flat(pair):
    causal, bidir = pair
    assert not bidir.causal
    assert np.all(np.abs(bidir.slopes) < 0.05)
    assert np.all(np.abs(bidir.resid_slopes) < 0.05)
    # Same models and inputs: every bidirectional position averages all T values, like the last causal one.
    assert bidir.attn_mean[0].mean() == pytest.approx(causal.attn_mean[0, -1], rel=0.35)
    assert bidir.theory is not None and np.ptp(bidir.theory) == 0


def test_gaussian_inputs_and_single_run_agree_with_the_pair():
    settings = NopeSettings(
        d_model=64, layers=1, heads=2, seq_len=128, seeds=1, batch=2, inputs="gaussian"
    )
    curves = variance_lab(settings)
    assert curves.attn_mean.shape == (1, 128)
    assert curves.attn_per_seed.shape == (1, 1, 128)
    assert -1.2 <= curves.slopes[0] <= -0.8
    payload = curves.to_dict()
    assert len(payload["layers"]) == 1 and len(payload["theory"]) == 128
    assert set(curves.frame().columns) >= {"layer", "position", "attn_output_variance", "theory"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"d_model": 100, "heads": 3},
        {"seq_len": 4},
        {"seeds": 0},
        {"inputs": "words"},
        {"init_std": 0.0},
        {"fit_from": 600},
    ],
)
def test_bad_settings_are_input_errors(kwargs):
    with pytest.raises(InputError):
        NopeSettings(**kwargs)
