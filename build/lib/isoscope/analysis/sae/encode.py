"""An SAE's encoder and decoder, the one implementation every figure, command and test uses.

f = sigma(W_enc^T (n(x) - s b_dec) + b_enc) and x_hat = n^-1(W_dec^T f + b_dec), with n the
input normalisation the SAE's config declares (none, a fixed factor, per-token norm sqrt(d) or
per-token layer norm; :data:`isoscope.analysis.sae.formats.NORMALISATIONS`), s = 1 when the SAE
subtracts ``b_dec`` from its input, and sigma ReLU (Bricken et al. 2023), TopK (Gao et al.
2024, arXiv 2406.04093: ReLU of the k largest pre-activations) or JumpReLU (Rajamanoharan et al.
2024, arXiv 2407.14435: z * [z > theta_f]).
"""

from __future__ import annotations

import numpy as np
import torch

from isoscope.analysis.sae.formats import SparseAutoencoder
from isoscope.engine.device import to_numpy

LAYER_NORM_EPS = 1e-5  # SAELens's layer_norm input normalisation


def normalise(sae: SparseAutoencoder, x: torch.Tensor) -> tuple[torch.Tensor, tuple]:
    """(n, d) float32 x as the SAE reads it, and what :func:`denormalise` needs to map back."""
    if sae.normalise == "scale":
        return x * sae.input_scale, (sae.input_scale,)
    if sae.normalise == "constant_norm_rescale":
        coeff = (sae.d_in**0.5) / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return x * coeff, (coeff,)
    if sae.normalise == "layer_norm":
        mu = x.mean(dim=-1, keepdim=True)
        std = (x - mu).std(dim=-1, keepdim=True)
        return (x - mu) / (std + LAYER_NORM_EPS), (mu, std)
    return x, ()


def denormalise(sae: SparseAutoencoder, y: torch.Tensor, ctx: tuple) -> torch.Tensor:
    """The inverse of :func:`normalise` on a reconstruction."""
    if sae.normalise in ("scale", "constant_norm_rescale"):
        return y / ctx[0]
    if sae.normalise == "layer_norm":
        mu, std = ctx
        return y * std + mu
    return y


def pre_activations(sae: SparseAutoencoder, x_in: torch.Tensor) -> torch.Tensor:
    """(n, m): W_enc^T (x_in - s b_dec) + b_enc of normalised inputs."""
    if sae.subtract_b_dec:
        x_in = x_in - sae.b_dec
    return torch.addmm(sae.b_enc, x_in, sae.w_enc)


def activate(sae: SparseAutoencoder, pre: torch.Tensor) -> torch.Tensor:
    """(n, m) feature activations from pre-activations, by the SAE's activation function."""
    if sae.activation == "topk":
        values, index = pre.topk(min(sae.k or 1, pre.shape[-1]), dim=-1)
        return torch.zeros_like(pre).scatter_(-1, index, values.relu())
    if sae.activation == "jumprelu":
        assert sae.threshold is not None  # every reader gives a JumpReLU SAE its threshold
        return pre.relu() * (pre > sae.threshold)
    return pre.relu()


def encode(sae: SparseAutoencoder, x: torch.Tensor) -> tuple[torch.Tensor, tuple]:
    """(n, m) feature activations of (n, d) states x (float32, on the SAE's device), and the
    normalisation's context for :func:`decode`."""
    x_in, ctx = normalise(sae, x)
    return activate(sae, pre_activations(sae, x_in)), ctx


def decode(sae: SparseAutoencoder, acts: torch.Tensor, ctx: tuple) -> torch.Tensor:
    """(n, d) reconstruction x_hat in the states' own scale."""
    return denormalise(sae, torch.addmm(sae.b_dec, acts, sae.w_dec), ctx)


def reconstruct(sae: SparseAutoencoder, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(feature activations (n, m), reconstruction (n, d)) of states x."""
    acts, ctx = encode(sae, x)
    return acts, decode(sae, acts, ctx)


def feature_direction(sae: SparseAutoencoder, feature: int) -> tuple[np.ndarray, float]:
    """(u (d,) float64, offset): feature ``feature``'s pre-activation as a direction and an
    offset, u . x + offset = W_enc[:, f] . (c x - s b_dec) + b_enc[f], for a card that reads
    h[t] . u + offset in place of h[t, d] (docs/methods.md section 15). With a fixed input
    factor c it is folded into u; an SAE that normalises each token (its norm or layer norm)
    reads n(x) instead of x, and u, offset hold for n(x)."""
    if not 0 <= feature < sae.width:
        raise IndexError(f"feature {feature} is outside 0..{sae.width - 1}")
    column = sae.w_enc[:, feature].detach().to("cpu", torch.float64)
    offset = float(sae.b_enc[feature])
    if sae.subtract_b_dec:
        offset -= float(column @ sae.b_dec.detach().to("cpu", torch.float64))
    scale = sae.input_scale if sae.normalise == "scale" else 1.0
    return to_numpy(column * scale), offset


def decoder_norms(sae: SparseAutoencoder) -> torch.Tensor:
    """(m,) ||W_dec[f]||, floored so that a zero row has loading 0 rather than NaN."""
    return sae.w_dec.norm(dim=1).clamp_min(1e-12)


def loadings(sae: SparseAutoencoder, dim: int, norms: torch.Tensor | None = None) -> torch.Tensor:
    """(m,) W_dec[f, dim] / ||W_dec[f]||: how much of each feature's direction is dimension
    ``dim`` (docs/methods.md section 16)."""
    norms = decoder_norms(sae) if norms is None else norms
    return sae.w_dec[:, dim] / norms
