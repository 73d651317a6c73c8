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


class _ConstantEpsNorm(torch.nn.Module):
    """A norm whose epsilon is a constant of its forward, no attribute (OLMo's LayerNorm)."""

    def __init__(self, width: int, kind: str, eps: float, affine: bool) -> None:
        super().__init__()
        self.kind, self._constant = kind, eps
        gen = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter(torch.randn(width, generator=gen)) if affine else None
        self.bias = torch.nn.Parameter(torch.randn(width, generator=gen)) if affine else None

    def forward(self, x):
        if self.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self._constant)
        return y if self.weight is None else y * self.weight + self.bias


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-5, 1e-3])
@pytest.mark.parametrize(("kind", "width"), [("layernorm", 16), ("rmsnorm", 16), ("layernorm", 15)])
def test_an_epsilon_that_is_no_attribute_is_read_from_the_module(kind, width, eps, affine):
    from isoscope.analysis.dimension.chain import measured_eps

    module = _ConstantEpsNorm(width, kind, eps, affine)
    gamma = np.ones(width) if not affine else module.weight.detach().double().numpy()
    beta = None if not affine else module.bias.detach().double().numpy()
    assert measured_eps(module, kind, gamma, beta) == pytest.approx(eps, abs=2e-7)
