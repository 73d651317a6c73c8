"""The compiled loops themselves (isoscope.engine.extraction.kernel_jit): the moments
(``moments_into``) for every token count around its four-token step, float32 and float64
activations, results in float64 as RunningStats passes them, equal to a float64 numpy reference;
the sample's row copy (``copy_rows``) equal to numpy's fancy indexing."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.engine.extraction import kernel_jit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_moments_into_equals_numpy_for_every_token_count(dtype):
    rng = np.random.default_rng(3)
    for n in range(1, 11):
        x = (rng.normal(size=(2, n, 19)) * 4 + 2).astype(dtype)
        x[:, :, 4] += 5e3  # a massive dimension: the centred pass must not cancel
        out = [np.full((2, 19), np.nan) for _ in range(5)]
        kernel_jit.moments_into(x, *out)
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=1)
        want = [
            mean,
            np.abs(x64).sum(axis=1),
            ((x64 - mean[:, None]) ** 2).sum(axis=1),
            x64.min(axis=1),
            x64.max(axis=1),
        ]
        for name, got, ref in zip(("mean", "abs_sum", "m2", "min", "max"), out, want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=f"{name} n={n}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copy_rows_equals_numpy_fancy_indexing(dtype):
    rng = np.random.default_rng(4)
    src = (rng.normal(size=(9, 13)) * 1e3).astype(dtype)
    for pick, slots in (
        (np.array([8, 0, 3]), np.array([5, 1, 2])),  # any order, any slots
        (np.arange(9), np.arange(9) + 2),  # every row
        (np.array([], dtype=np.int64), np.array([], dtype=np.int64)),  # none
    ):
        dst = np.full((12, 13), -1.0, dtype=np.float32)
        want = dst.copy()
        want[slots] = src[pick]
        kernel_jit.copy_rows(src, pick.astype(np.int64), slots.astype(np.int64), dst)
        np.testing.assert_array_equal(dst, want)
