"""LLM.int8-style outlier features (Dettmers et al. 2022) from planted per-site counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.int8 import Int8Accumulator, int8_from_counts
from isoscope.engine.arch.hooks import forward_hooks


def test_rule_needs_six_percent_of_tokens_at_a_quarter_of_the_sites():
    sites, d, n = 8, 10, 1000
    counts = np.zeros((sites, d), dtype=np.int64)
    counts[:2, 4] = 60  # exactly 6 % at 2 of 8 sites = 25 %: an outlier feature
    counts[:1, 5] = 500  # heavy, but at 1 site only (12.5 %)
    counts[:, 6] = 59  # everywhere, but 5.9 % of tokens: never counts
    stats = int8_from_counts([f"s{i}" for i in range(sites)], counts, np.ones(sites), n)
    assert stats.outlier_features == (4,)
    assert stats.site_share[4] == pytest.approx(0.25)
    assert stats.site_share[5] == pytest.approx(0.125)
    assert stats.site_share[6] == 0
    assert stats.ranked_dims() == [{"dim": 4, "site_share": 0.25}, {"dim": 5, "site_share": 0.125}]
    assert "1 outlier feature" in stats.verdict() and "dims 4" in stats.verdict()
    assert stats.to_dict()["outlier_features"] == [4]


def test_verdicts_without_outlier_features():
    sites, d = 4, 3
    none = int8_from_counts(["a", "b", "c", "d"], np.zeros((sites, d)), np.zeros(sites), 100)
    assert none.outlier_features == () and none.ranked_dims() == []
    assert none.verdict().startswith("No outlier features: no dim")
    close = np.zeros((8, d))
    close[0, 2] = 10  # counts at 1 of 8 sites: 12.5 %
    near = int8_from_counts(list("abcdefgh"), close, np.zeros(8), 100)
    assert "dim 2" in near.verdict() and "needs 25 %" in near.verdict()


def test_accumulator_counts_only_unpadded_tokens_through_hooks():
    torch.manual_seed(0)
    norms = [torch.nn.Identity(), torch.nn.Identity()]
    acc = Int8Accumulator(["L1.pre_attn_ln", "L1.pre_mlp_ln"], 4, torch.device("cpu"))
    x = torch.zeros(2, 5, 4)
    x[0, :, 1] = 7.0  # text 0: dim 1 is >= 6 on all 5 tokens
    x[1, :, 1] = -9.0  # text 1: 2 real tokens, then padding
    x[1, 2:, 2] = 100.0  # a huge value in padding only: must not count
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    acc.mask = mask
    acc.add_tokens(int(mask.sum()))
    with forward_hooks({norms[0]: acc.hook(0), norms[1]: acc.hook(1)}):
        norms[0](x)
        norms[1](x * 0.5)
    stats = acc.finish()
    assert stats.n_tokens == 7
    np.testing.assert_allclose(stats.token_share[0], [0, 1, 0, 0])
    np.testing.assert_allclose(stats.token_share[1], [0, 0, 0, 0])  # halved: 3.5 and 4.5 < 6
    np.testing.assert_allclose(stats.max_abs, [9.0, 4.5])
    assert stats.outlier_features == (1,)


def _accumulate(scale: float, width: int = 32, n: int = 400, seed: int = 0):
    """One site of unit-normal outputs times ``scale`` (dim 0 planted at 10 x the site's spread on
    half the tokens), through the real hook."""
    from isoscope.analysis.massive.int8 import Int8Accumulator

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, width, generator=gen)
    x[0, : n // 2, 0] = 10.0
    acc = Int8Accumulator(["L1.pre_attn_ln"], width, torch.device("cpu"))
    acc.mask = torch.ones(1, n, dtype=torch.bool)
    acc.add_tokens(n)
    acc.hook(0)(None, (), x * scale)
    return acc.finish()


def test_a_unit_scale_site_is_not_flagged_and_both_rules_agree():
    stats = _accumulate(1.0)
    assert stats.median_abs[0] == pytest.approx(0.6745, rel=0.1)
    assert not stats.off_scale.any()
    assert stats.outlier_features == (0,) and stats.relative_outlier_features == (0,)
    assert "does not apply" not in stats.verdict()
    data = stats.to_dict()
    assert data["n_sites"] == 1 and data["per_site"][0]["off_scale"] is False
    assert data["per_site"][0]["median_abs"] == pytest.approx(stats.median_abs[0])


def test_a_large_scale_site_is_flagged_and_the_scale_free_rule_stays_put():
    """At 12 x unit scale (median |x| ~ 8, as on Gemma's sites) nearly every dim passes |x| >= 6:
    the literal rule calls them all outliers, the verdict says the threshold does not apply, and
    the scale-free rule still finds only the planted dim."""
    stats = _accumulate(12.0)
    assert stats.off_scale.all() and stats.median_abs[0] > 6
    assert len(stats.outlier_features) > 20
    assert stats.relative_outlier_features == (0,)
    verdict = stats.verdict()
    assert "does not apply" in verdict and "Scale-free" in verdict and "6.7B" not in verdict
    assert stats.to_dict()["scale_free"]["outlier_features"] == [0]


def test_a_tiny_scale_site_is_flagged_too():
    stats = _accumulate(0.01)
    assert stats.off_scale.all() and stats.outlier_features == ()
    assert stats.relative_outlier_features == (0,)


def test_a_unit_site_and_a_100x_site_side_by_side():
    """Two sites of one scan, as a Gemma-style model has them: a unit-scale projection input and
    one at ~100 x (median |x| ~ 67). Only the second is flagged, and the verdict names one site."""
    from isoscope.analysis.massive.int8 import Int8Accumulator

    gen = torch.Generator().manual_seed(0)
    n, width = 400, 32
    acc = Int8Accumulator(["L1.pre_attn_ln", "L1.pre_mlp_ln"], width, torch.device("cpu"))
    acc.mask = torch.ones(1, n, dtype=torch.bool)
    acc.add_tokens(n)
    acc.hook(0)(None, (), torch.randn(1, n, width, generator=gen))
    acc.hook(1)(None, (), 100.0 * torch.randn(1, n, width, generator=gen))
    stats = acc.finish()
    assert stats.median_abs[0] == pytest.approx(0.6745, rel=0.1)
    assert stats.median_abs[1] == pytest.approx(67.45, rel=0.1)
    assert stats.off_scale.tolist() == [False, True]
    assert "At 1 of 2 sites" in stats.verdict()
    assert [s["off_scale"] for s in stats.to_dict()["per_site"]] == [False, True]
