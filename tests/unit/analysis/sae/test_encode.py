"""The SAE arithmetic on synthetic arrays: activation functions, input normalisations, a
feature's direction, the hook -> state mapping, Neuronpedia links, the settings' checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.sae.encode import (
    activate,
    denormalise,
    encode,
    feature_direction,
    loadings,
    pre_activations,
    reconstruct,
)
from isoscope.analysis.sae.encode import normalise as normalise_fn
from isoscope.analysis.sae.formats import SparseAutoencoder
from isoscope.analysis.sae.params import SaeSettings
from isoscope.engine.errors import InputError

D, M = 6, 10


def _sae(activation="relu", *, normalise="none", scale=1.0, subtract=True, k=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    return SparseAutoencoder(
        w_enc=torch.randn(D, M, generator=g),
        w_dec=torch.randn(M, D, generator=g),
        b_enc=torch.randn(M, generator=g) * 0.1,
        b_dec=torch.randn(D, generator=g),
        threshold=torch.full((M,), 0.3) if activation == "jumprelu" else None,
        k=k,
        activation=activation,
        format="test",
        subtract_b_dec=subtract,
        normalise=normalise,
        input_scale=scale,
    )


def test_relu_topk_jumprelu_follow_their_definitions():
    pre = torch.tensor([[-1.0, 0.2, 0.5, 2.0, 0.31]])
    relu = _sae("relu")
    assert torch.equal(activate(relu, pre), pre.relu())
    jump = SparseAutoencoder(**{**relu.__dict__, "activation": "jumprelu",
                                "threshold": torch.full((5,), 0.3)})  # fmt: skip
    assert torch.equal(activate(jump, pre), torch.tensor([[0.0, 0.0, 0.5, 2.0, 0.31]]))
    top2 = SparseAutoencoder(**{**relu.__dict__, "activation": "topk", "k": 2})
    assert torch.equal(activate(top2, pre), torch.tensor([[0.0, 0.0, 0.5, 2.0, 0.0]]))


@pytest.mark.parametrize("k", [1, 3, M])
def test_topk_keeps_at_most_k_features(k):
    sae = _sae("topk", k=k)
    acts, _ = encode(sae, torch.randn(50, D, generator=torch.Generator().manual_seed(1)))
    assert int((acts > 0).sum(-1).max()) <= k


NORMALISATIONS = [
    ("none", 1.0),
    ("scale", 3.5),
    ("constant_norm_rescale", 1.0),
    ("layer_norm", 1.0),
]


@pytest.mark.parametrize("normalise,scale", NORMALISATIONS)
def test_each_normalisation_maps_back(normalise, scale):
    sae = _sae(normalise=normalise, scale=scale)
    x = torch.randn(20, D, generator=torch.Generator().manual_seed(2)) * 30
    x_in, ctx = normalise_fn(sae, x)
    if normalise == "constant_norm_rescale":
        assert torch.allclose(x_in.norm(dim=-1), torch.full((20,), D**0.5))
    if normalise == "layer_norm":
        assert torch.allclose(x_in.mean(dim=-1), torch.zeros(20), atol=1e-5)
    assert torch.allclose(denormalise(sae, x_in, ctx), x, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("normalise,scale", NORMALISATIONS[:3])
def test_an_identity_sae_reconstructs_exactly(normalise, scale):
    """W_dec = W_enc^T = I with no bias and ReLU on positive inputs: x_hat = x, whatever
    factor maps x in and back out."""
    eye = torch.eye(D)
    sae = SparseAutoencoder(eye.clone(), eye.clone(), torch.zeros(D), torch.zeros(D), "relu",
                            "test", normalise=normalise, input_scale=scale)  # fmt: skip
    x = torch.rand(20, D, generator=torch.Generator().manual_seed(2)) + 0.5
    _, x_hat = reconstruct(sae, x)
    assert torch.allclose(x_hat, x, atol=1e-5)


@pytest.mark.parametrize(
    "normalise,scale,subtract", [("none", 1.0, True), ("none", 1.0, False), ("scale", 2.5, True),
                                 ("scale", 0.1, False)],
)  # fmt: skip
def test_feature_direction_gives_the_pre_activation(normalise, scale, subtract):
    sae = _sae(normalise=normalise, scale=scale, subtract=subtract)
    x = torch.randn(7, D, generator=torch.Generator().manual_seed(3))
    x_in = x * scale if normalise == "scale" else x
    pre = pre_activations(sae, x_in).double().numpy()
    for f in (0, 4, M - 1):
        u, offset = feature_direction(sae, f)
        np.testing.assert_allclose(x.double().numpy() @ u + offset, pre[:, f], rtol=1e-5, atol=1e-5)
    with pytest.raises(IndexError):
        feature_direction(sae, M)


def test_loadings_are_the_decoder_rows_normalised():
    sae = _sae()
    rows = sae.w_dec / sae.w_dec.norm(dim=1, keepdim=True)
    for d in range(D):
        assert torch.allclose(loadings(sae, d), rows[:, d])


@pytest.mark.parametrize(
    "field,value",
    [("max_length", 1), ("batch_size", 0), ("dense_share", 0.0), ("dense_share", 1.5),
     ("features_per_dim", 0), ("dim_tokens", 5000), ("top_tokens", 2.5), ("worst_tokens", 0),
     ("state", -1)],
)  # fmt: skip
def test_settings_refuse_out_of_range_values(field, value):
    with pytest.raises(InputError):
        SaeSettings(**{field: value})
