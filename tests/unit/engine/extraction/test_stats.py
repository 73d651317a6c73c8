"""RunningStats: streaming statistics equal full-batch statistics however the corpus is split."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.extraction.stats import RunningStats


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


def test_ties_count_the_first_dimension_like_numpy():
    """Integer-valued activations tie often: argmin/argmax counts follow numpy (first index wins)."""
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, size=(2, 300, 6)).astype(np.float32)
    x[:, :50, :] = 1.0  # 50 tokens where every dim ties: all go to dim 0
    stats = RunningStats(2, 6)
    for part in np.array_split(x, 7, axis=1):
        stats.update(part)
    ref = _full_batch(x.astype(np.float64))
    np.testing.assert_array_equal(stats.argmin_count, ref["argmin_count"])
    np.testing.assert_array_equal(stats.argmax_count, ref["argmax_count"])
    assert stats.argmin_count[:, 0].min() >= 50


def test_masked_padding_is_left_out_per_state_tensors():
    """The extraction path: per-state (B, T, d) tensors, a padding mask, tokens gathered by mask.
    Padding holds huge values; none of them may reach any statistic."""
    import torch

    rng = np.random.default_rng(4)
    S, B, T, d = 3, 5, 9, 8
    hidden = rng.normal(size=(S, B, T, d)) * rng.uniform(0.5, 3, size=d)
    lengths = np.array([9, 7, 7, 3, 1])
    mask = np.arange(T)[None, :] < lengths[:, None]
    hidden[:, ~mask, :] = 1e6  # padding garbage
    hidden[:, ~mask, 2] = -1e6
    states = [torch.from_numpy(hidden[s].astype(np.float32)) for s in range(S)]
    torch_mask = torch.from_numpy(mask)
    stats = RunningStats(S, d)
    stats.update([h[torch_mask] for h in states])
    ref = _full_batch(hidden[:, mask, :].astype(np.float32).astype(np.float64))
    assert stats.count == lengths.sum()
    for name in ("mean", "variance", "min", "max", "mean_abs"):
        np.testing.assert_allclose(getattr(stats, name), ref[name], rtol=1e-12, err_msg=name)
    np.testing.assert_array_equal(stats.argmin_count, ref["argmin_count"])
    np.testing.assert_array_equal(stats.argmax_count, ref["argmax_count"])


def test_merge_of_partial_stats_equals_one_pass():
    """Chan merge of independently accumulated parts (any grouping) == one stream."""
    rng = np.random.default_rng(5)
    x = rng.normal(3.0, 2.0, size=(2, 400, 5))
    one = RunningStats(2, 5)
    one.update(x)
    parts = [RunningStats(2, 5) for _ in range(3)]
    for i, part in enumerate(np.split(x, [17, 260], axis=1)):
        parts[i].update(part)
    merged = RunningStats(2, 5).merge(parts[2]).merge(parts[0]).merge(parts[1])
    assert merged.count == 400
    for name in ("mean", "variance", "min", "max", "mean_abs"):
        np.testing.assert_allclose(getattr(merged, name), getattr(one, name), rtol=1e-12)
    np.testing.assert_array_equal(merged.argmax_count, one.argmax_count)
    with pytest.raises(ValueError):
        merged.merge(RunningStats(3, 5))


def test_accumulators_are_float64_on_the_batch_device():
    import torch

    from isoscope.engine.extraction.stats import accumulation_device

    stats = RunningStats.from_batch([torch.ones(4, 3, dtype=torch.float32)] * 2)
    assert stats._mean.dtype == torch.float64 and stats.device.type == "cpu"
    assert accumulation_device("mps").type == "cpu"  # MPS lacks float64
    np.testing.assert_array_equal(stats.mean, np.ones((2, 3)))


@pytest.mark.parametrize("groups", [[3], [1, 1, 1], [2, 1]])
def test_states_reduced_together_equal_the_reference_however_grouped(groups):
    """The extraction reduces consecutive states of a batch together ((g, n, d) at once), reusing
    scratch buffers across calls; every grouping equals the per-state reference, ties included."""
    import torch

    from isoscope.engine.extraction.stats import WorkBuffers

    rng = np.random.default_rng(6)
    S, d = 3, 10
    buffers = WorkBuffers()
    stats = RunningStats(S, d)
    batches = []
    for n in (40, 7, 23):  # shrinking and growing batches reuse the same buffers
        x = (rng.normal(size=(S, n, d)) * rng.uniform(0.5, 4, size=d) + 50.0).astype(np.float32)
        x[:, : n // 3, :] = np.round(x[:, : n // 3, :] / 20) * 20  # many ties
        batches.append(x)
        batch = RunningStats(S, d)
        s0 = 0
        for g in groups:
            batch.add_states(s0, torch.from_numpy(x[s0 : s0 + g]), buffers)
            s0 += g
        stats.merge(batch)
    ref = _full_batch(np.concatenate(batches, axis=1).astype(np.float64))
    for name in ("mean", "variance", "min", "max", "mean_abs"):
        np.testing.assert_allclose(getattr(stats, name), ref[name], rtol=1e-12, err_msg=name)
    np.testing.assert_array_equal(stats.argmin_count, ref["argmin_count"])
    np.testing.assert_array_equal(stats.argmax_count, ref["argmax_count"])
    with pytest.raises(ValueError):
        RunningStats(S, d).add_states(2, torch.zeros(2, 4, d))  # states 2..3 of 3


@pytest.mark.parametrize("g", [1, 3])
def test_eager_moments_are_centred_in_float64_and_propagate_like_torch(g):
    """The CPU's eager moments (one float64 copy, batch-norm statistics) against an extended-
    precision reference on the cases that break shortcuts: a large offset over a small spread
    (a sum of squares minus n * mean^2 would lose it), a constant dimension (its sum of squares
    about the mean is exactly zero), a massive activation; NaN and infinity propagate as in the
    generic torch formulas (an infinite dimension has an infinite mean and an undefined spread)."""
    import torch

    from isoscope.engine.extraction.kernel import MOMENTS
    from isoscope.engine.extraction.stats import moments

    rng = np.random.default_rng(8)
    n, d = 301, 6
    x = rng.normal(size=(g, n, d))
    x[..., 0] = 1e4 + 1e-2 * x[..., 0]
    x[..., 1] = 3.3
    x[:, 5, 2] = 3e3
    x = x.astype(np.float32)
    with MOMENTS.suspended():
        mean, abs_sum, m2, lo, hi = moments(torch.from_numpy(x))
    ref = x.astype(np.longdouble)
    ref_mean = ref.mean(axis=1)
    ref_m2 = ((ref - ref_mean[:, None]) ** 2).sum(axis=1)
    np.testing.assert_allclose(mean.numpy(), ref_mean.astype(np.float64), rtol=1e-15)
    np.testing.assert_allclose(abs_sum.numpy(), np.abs(ref).sum(axis=1).astype(float), rtol=1e-14)
    np.testing.assert_allclose(m2.numpy(), ref_m2.astype(np.float64), rtol=1e-12)
    assert (m2.numpy()[:, 1] == 0).all()
    np.testing.assert_array_equal(lo.numpy(), x.min(axis=1))
    np.testing.assert_array_equal(hi.numpy(), x.max(axis=1))

    x[:, 7, 3], x[:, 9, 4] = np.nan, np.inf
    mean, abs_sum, m2, lo, hi = (t.numpy() for t in moments(torch.from_numpy(x)))
    assert np.isnan(mean[:, 3]).all() and np.isnan(m2[:, 3]).all() and np.isnan(lo[:, 3]).all()
    assert np.isposinf(mean[:, 4]).all() and np.isposinf(abs_sum[:, 4]).all()
    assert np.isnan(m2[:, 4]).all() and np.isposinf(hi[:, 4]).all()
    assert np.isfinite(m2[:, :3]).all() and np.isfinite(m2[:, 5]).all()


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("group", [1, 3])
def test_eager_cpu_batches_write_the_full_batch_statistics_into_their_rows(dtype, group):
    """The eager CPU path writes each group's moments and extreme counts straight into the
    accumulators' rows (numpy for the counts where numpy holds the dtype, torch copies for
    bfloat16, whose min and max are converted to float64): the result is the full-batch one."""
    import torch

    from isoscope.engine.extraction.kernel import MOMENTS
    from isoscope.engine.extraction.stats import WorkBuffers

    rng = np.random.default_rng(5)
    S, n, d = 3, 97, 10
    x = rng.normal(size=(S, n, d)) * rng.uniform(0.5, 4, size=d) + rng.normal(0, 2, size=d)
    x[:, 11, 6] = 60.0  # one token's maximum and the dimension's max
    states = torch.from_numpy(x).to(getattr(torch, dtype))
    ref = _full_batch(states.to(torch.float64).numpy())
    stats, buffers = RunningStats(S, d), WorkBuffers()
    with MOMENTS.suspended():
        for s0 in range(0, S, group):
            stats.add_states(s0, states[s0 : s0 + group], buffers)
            buffers.take("x64", (S, n, d), torch.float64, torch.device("cpu")).fill_(7.0)
    assert stats.count == n
    for name in ("mean", "variance", "mean_abs"):
        np.testing.assert_allclose(getattr(stats, name), ref[name], rtol=1e-12, atol=1e-12)
    for name in ("min", "max", "argmin_count", "argmax_count"):
        np.testing.assert_array_equal(getattr(stats, name), ref[name])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_eager_state_rows_equal_a_batch_through_add_states(dtype):
    """EagerStates, the kernel's eager twin, fills a batch's rows one state at a time with
    exactly what add_states computes for the whole batch with the kernel off, a NaN and an
    infinity included (torch's propagation), and the merged result is the full-batch one."""
    import torch

    from isoscope.engine.extraction.kernel import MOMENTS
    from isoscope.engine.extraction.stats import EagerStates, WorkBuffers

    rng = np.random.default_rng(9)
    S, n, d = 4, 53, 12
    x = rng.normal(size=(S, n, d)) * 3 + rng.normal(0, 5, size=d)
    x[:, :, 2] += 1e4  # a large offset over a small spread
    states = torch.from_numpy(x.astype(dtype))

    def by_state(states: torch.Tensor) -> RunningStats:
        stats = RunningStats(S, d)
        rows = stats.state_rows(n)
        x = torch.empty((n, d), dtype=states.dtype)  # the caller's gather buffer
        eager = EagerStates(x, rows, WorkBuffers())
        for s in range(S):
            x.copy_(states[s])
            eager.reduce(s)
        return stats

    def batched(states: torch.Tensor) -> RunningStats:
        stats = RunningStats(S, d)
        with MOMENTS.suspended():
            stats.add_states(0, states, WorkBuffers())
        return stats

    def assert_same(a: RunningStats, b: RunningStats) -> None:
        names = ("_mean", "_m2", "_abs_sum", "_min", "_max", "_argmin", "_argmax")
        for name in names:
            torch.testing.assert_close(
                getattr(a, name), getattr(b, name), rtol=0, atol=0, equal_nan=True
            )

    got = by_state(states)
    assert_same(got, batched(states))
    ref = _full_batch(states.to(torch.float64).numpy())
    total = RunningStats(S, d).merge(got)
    for name in ("mean", "variance", "mean_abs"):
        np.testing.assert_allclose(getattr(total, name), ref[name], rtol=1e-12)
    for name in ("min", "max", "argmin_count", "argmax_count"):
        np.testing.assert_array_equal(getattr(total, name), ref[name])

    states[1, 7, 3], states[2, 9, 4] = float("nan"), float("inf")
    got = by_state(states)
    assert_same(got, batched(states))
    assert np.isnan(got.mean[1, 3]) and np.isposinf(got.mean[2, 4]) and np.isnan(got.m2[2, 4])
