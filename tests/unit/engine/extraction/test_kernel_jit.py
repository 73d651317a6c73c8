"""The compiled moments loop itself (backend.engine.extraction.kernel_jit.moments_into): every
token count around its four-token step, float32 and float64 activations, results in float64 as
RunningStats passes them; equal to a float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from backend.engine.extraction import kernel_jit


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
