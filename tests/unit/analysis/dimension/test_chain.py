"""The frozen-norm identity the decomposition walks back through (Kobayashi et al. 2021): for a
norm y = gamma * n(x) / s + beta, y . v = (through_norm(v) . x) / s + beta . v, on LayerNorm
(centring) and RMSNorm, for random inputs and reading vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.dimension.chain import norm_scale, through_norm


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_a_frozen_norm_is_linear_in_its_input(kind, seed):
    rng = np.random.default_rng(seed)
    width, tokens = 16, 5
    x = rng.normal(size=(tokens, width)) * rng.uniform(0.5, 30)
    gamma, beta, v = rng.normal(size=width), rng.normal(size=width), rng.normal(size=width)
    eps = 1e-5
    xt = torch.as_tensor(x)
    if kind == "layernorm":
        y = torch.nn.functional.layer_norm(
            xt, (width,), torch.as_tensor(gamma), torch.as_tensor(beta), eps
        )
    else:
        y = xt / torch.sqrt(xt.pow(2).mean(-1, keepdim=True) + eps) * torch.as_tensor(
            gamma
        ) + torch.as_tensor(beta)
    s = norm_scale(xt, kind, eps).double().numpy()
    direct = y.numpy() @ v
    walked = (x @ through_norm(v, gamma, kind)) / s + beta @ v
    assert np.allclose(direct, walked, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_the_scale_is_the_norms_divisor(kind):
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])
    expected = x.var(-1, unbiased=False) if kind == "layernorm" else x.pow(2).mean(-1)
    assert torch.allclose(norm_scale(x, kind, 0.0), expected.sqrt())


def test_layernorm_reading_vectors_are_centred():
    v = through_norm(np.array([1.0, 0.0, 0.0]), np.array([2.0, 1.0, 1.0]), "layernorm")
    assert abs(v.sum()) < 1e-12 and v[0] > 0
