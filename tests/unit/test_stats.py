"""RunningStats: streaming statistics equal full-batch statistics however the corpus is split."""

from __future__ import annotations

import numpy as np
import pytest

from backend.stats import RunningStats


def _full_batch(x: np.ndarray) -> dict[str, np.ndarray]:
    """Reference statistics of x (S, n, d) in one go."""
    S, _, d = x.shape
    argmin = np.stack([np.bincount(x[s].argmin(axis=1), minlength=d) for s in range(S)])
    argmax = np.stack([np.bincount(x[s].argmax(axis=1), minlength=d) for s in range(S)])
    return {
        "mean": x.mean(axis=1),
        "variance": x.var(axis=1),
        "min": x.min(axis=1),
        "max": x.max(axis=1),
        "mean_abs": np.abs(x).mean(axis=1),
        "argmin_count": argmin,
        "argmax_count": argmax,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streaming_equals_full_batch_for_random_splits(seed):
    rng = np.random.default_rng(seed)
    S, n, d = 3, 517, 24
    # Different scale and offset per dimension, plus one planted outlier dim, so every statistic matters.
    x = rng.normal(size=(S, n, d)) * rng.uniform(0.1, 5, size=d) + rng.normal(0, 3, size=d)
    x[:, :, 7] -= 40.0
    cuts = np.sort(rng.choice(np.arange(1, n), size=rng.integers(1, 30), replace=False))
    stats = RunningStats(S, d)
    for part in np.split(x, cuts, axis=1):
        stats.update(part.astype(np.float32).astype(np.float64))
    ref = _full_batch(x.astype(np.float32).astype(np.float64))
    assert stats.count == n
    for name in ("mean", "variance", "min", "max", "mean_abs"):
        np.testing.assert_allclose(
            getattr(stats, name), ref[name], rtol=1e-10, atol=1e-10, err_msg=name
        )
    np.testing.assert_array_equal(stats.argmin_count, ref["argmin_count"])
    np.testing.assert_array_equal(stats.argmax_count, ref["argmax_count"])
    assert stats.argmin_count[:, 7].min() == n  # the planted dim holds every token's minimum


def test_float32_batches_accumulate_in_float64():
    """A large common offset would lose precision in float32 running sums; float64 keeps it."""
    rng = np.random.default_rng(0)
    x = (1000.0 + rng.normal(size=(1, 4000, 4))).astype(np.float32)
    stats = RunningStats(1, 4)
    for part in np.array_split(x, 40, axis=1):
        stats.update(part)
    # Per-batch sums of squares lose ~eps64 * (mean / std)^2 = 2e-10 relative here; float32
    # accumulation would be off by percents.
    np.testing.assert_allclose(stats.variance, x.astype(np.float64).var(axis=1), rtol=1e-7)
    np.testing.assert_allclose(stats.mean, x.astype(np.float64).mean(axis=1), rtol=1e-12)
    assert stats.mean.dtype == np.float64


def test_empty_batch_is_ignored_and_bad_shapes_rejected():
    stats = RunningStats(2, 3)
    stats.update(np.zeros((2, 0, 3)))
    assert stats.count == 0
    with pytest.raises(ValueError):
        stats.update(np.zeros((3, 5, 3)))
    with pytest.raises(ValueError):
        stats.update(np.zeros((2, 5, 4)))
