"""Outliers inside the mixers (isoscope.analysis.massive.inner) on planted activations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.inner import (
    NORM_OUTPUT,
    SSM_INPUT,
    InnerAccumulator,
    InnerSite,
    per_token,
)


def test_per_token_reads_batch_first_and_token_flattened_layouts():
    mask = torch.tensor([[True, True, False], [True, False, False]])
    x = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(per_token(x, mask), x[mask])
    # Gated DeltaNet's norm runs on (B * T * heads, d_head): back to (N, heads * d_head)
    heads = x.reshape(2, 3, 2, 2).reshape(-1, 2)
    np.testing.assert_array_equal(per_token(heads, mask), x[mask])
    assert per_token(torch.zeros(5, 7), mask) is None  # not laid out by token


def test_a_planted_outlier_channel_is_found_at_its_site():
    sites = [
        InnerSite("L1.mixer:ssm_input", SSM_INPUT, "layers.0.mixer.in_proj", 1, "Mamba-2"),
        InnerSite("L1.linear_attn.norm", NORM_OUTPUT, "layers.0.linear_attn.norm", 1, "x"),
    ]
    acc = InnerAccumulator(sites, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 50, 8, generator=gen) * 0.5
    x[..., 3] = 20.0  # every token: far above 6 and above 8.9 x the median
    acc.mask = torch.ones(2, 50, dtype=torch.bool)
    acc.mask[1, 40:] = False  # padding is not counted
    acc.hook_output(0)(None, (), x)
    acc.hook_input(1)(None, (torch.randn(2, 50, 4, generator=gen) * 0.1,))
    reading = acc.finish()
    assert reading.width == (8, 4) and reading.n_tokens == 90
    assert reading.absolute[0] == (3,) and reading.relative[0] == (3,)
    assert reading.absolute[1] == () and reading.relative[1] == ()
    assert reading.max_abs[0] == pytest.approx(20.0)
    assert reading.median_abs[0] == pytest.approx(0.5 * 0.6745, rel=0.3)
    rows = reading.to_dict()
    assert rows[0]["outlier_channels"] == [3] and rows[0]["mixer"] == "Mamba-2"
    assert rows[1]["max_over_median"] > 1


def test_a_transform_reads_what_the_module_output_becomes():
    site = InnerSite("L1.mixer:ssm_input", SSM_INPUT, "layers.0.mixer.in_proj", 1, "Mamba")
    acc = InnerAccumulator([site], torch.device("cpu"))
    acc.mask = torch.ones(1, 4, dtype=torch.bool)
    acc.hook_output(0, lambda out: out[..., :2] * 10)(None, (), torch.ones(1, 4, 6))
    reading = acc.finish()
    assert reading.width == (2,) and reading.absolute[0] == (0, 1)
