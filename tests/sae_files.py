"""Sparse autoencoders built in the tests, with planted features, saved in each released format
(Gemma Scope ``params.safetensors``, SAELens, sparsify), and a tiny BERT with a planted outlier
dimension for them to read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

OUTLIER_DIM = 7  # the tiny model's planted outlier dimension (state 1)
OUTLIER_BIAS = 20.0
MASSIVE_DIM = 3  # with ``massive=True``: a dimension whose values reach far past 700
MASSIVE_GAMMA = 1000.0
OUTLIER_FEATURE, DENSE_FEATURE, DEAD_FEATURE = 0, 1, 2
WIDTH = 24  # SAE features
THRESHOLD = 0.5


@dataclass(frozen=True)
class PlantedSae:
    """Weights in Gemma Scope / SAELens orientation: w_enc (d, m), w_dec (m, d)."""

    w_enc: np.ndarray
    w_dec: np.ndarray
    b_enc: np.ndarray
    b_dec: np.ndarray
    threshold: np.ndarray


def planted_sae(mean_direction: np.ndarray, width: int = WIDTH, seed: int = 0) -> PlantedSae:
    """Feature 0 reads and writes the outlier dim's basis vector; feature 1 the (unit) mean
    direction (it fires on most tokens: dense); feature 2 never fires (dead); the rest are weak
    random features."""
    d = len(mean_direction)
    rng = np.random.default_rng(seed)
    w_dec = rng.normal(0, 1, (width, d)).astype(np.float32)
    w_dec /= np.linalg.norm(w_dec, axis=1, keepdims=True)
    w_enc = (0.01 * w_dec.T).astype(np.float32)
    b_enc = np.zeros(width, np.float32)
    unit_mean = (mean_direction / np.linalg.norm(mean_direction)).astype(np.float32)
    basis = np.zeros(d, np.float32)
    basis[OUTLIER_DIM] = 1.0
    w_dec[OUTLIER_FEATURE] = basis
    w_enc[:, OUTLIER_FEATURE] = basis
    w_dec[DENSE_FEATURE] = unit_mean
    w_enc[:, DENSE_FEATURE] = unit_mean
    w_enc[:, DEAD_FEATURE] = 0.0
    b_enc[DEAD_FEATURE] = -1.0
    return PlantedSae(
        w_enc=w_enc,
        w_dec=w_dec,
        b_enc=b_enc,
        b_dec=np.zeros(d, np.float32),
        threshold=np.full(width, THRESHOLD, np.float32),
    )


def _save(path: Path, tensors: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))


def save_gemma_scope(sae: PlantedSae, folder: Path, *, layer: int = 0, config: bool = True) -> Path:
    """Gemma Scope 2's layout: ``params.safetensors`` (lower-case keys) and, with ``config``,
    its ``config.json`` naming the hook point."""
    folder.mkdir(parents=True, exist_ok=True)
    _save(
        folder / "params.safetensors",
        {
            "w_enc": sae.w_enc,
            "w_dec": sae.w_dec,
            "b_enc": sae.b_enc,
            "b_dec": sae.b_dec,
            "threshold": sae.threshold,
        },
    )
    if config:
        (folder / "config.json").write_text(
            json.dumps(
                {
                    "architecture": "jump_relu",
                    "hf_hook_point_in": f"model.layers.{layer}.output",
                    "model_name": "tiny-bert",
                }
            )
        )
    return folder


def save_saelens(
    sae: PlantedSae, folder: Path, *, hook: str = "blocks.0.hook_resid_post", **cfg
) -> Path:
    """SAELens's layout: ``cfg.json`` + ``sae_weights.safetensors`` (JumpReLU unless ``cfg``
    says otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {"W_enc": sae.w_enc, "W_dec": sae.w_dec, "b_enc": sae.b_enc, "b_dec": sae.b_dec}
    config = {
        "architecture": "jumprelu",
        "d_in": sae.w_enc.shape[0],
        "d_sae": sae.w_enc.shape[1],
        "apply_b_dec_to_input": False,
        "normalize_activations": "none",
        "metadata": {"hook_name": hook, "model_name": "tiny-bert"},
    }
    config.update(cfg)
    if config["architecture"] == "jumprelu":
        tensors["threshold"] = sae.threshold
    _save(folder / "sae_weights.safetensors", tensors)
    (folder / "cfg.json").write_text(json.dumps(config))
    return folder


def save_sparsify(sae: PlantedSae, root: Path, *, layer: int = 0, k: int = 4) -> Path:
    """sparsify's layout: ``layers.N/cfg.json`` + ``layers.N/sae.safetensors`` with
    ``encoder.weight`` (m, d), ``encoder.bias``, ``W_dec`` (m, d), ``b_dec``."""
    folder = root / f"layers.{layer}"
    folder.mkdir(parents=True, exist_ok=True)
    _save(
        folder / "sae.safetensors",
        {
            "encoder.weight": sae.w_enc.T,
            "encoder.bias": sae.b_enc,
            "W_dec": sae.w_dec,
            "b_dec": sae.b_dec,
        },
    )
    cfg = {"k": k, "d_in": sae.w_enc.shape[0], "num_latents": sae.w_enc.shape[1]}
    (folder / "cfg.json").write_text(json.dumps(cfg))
    return folder


def save_outlier_bert(folder: Path, *, massive: bool = False) -> Path:
    """A 2-layer width-32 random BERT whose first layer's output LayerNorm has bias
    ``OUTLIER_BIAS`` in ``OUTLIER_DIM``: state 1 carries a planted outlier dimension. With
    ``massive``, its gain in ``MASSIVE_DIM`` is ``MASSIVE_GAMMA`` instead: |h[t, 3]| passes
    Sun et al.'s threshold (> 100 and > 1000 x the median |h|) on some tokens and not others."""
    import torch

    from isoscope.engine.load.models import build_random_model, bundled_tokenizer

    tokenizer = bundled_tokenizer()
    model = build_random_model(
        "bert", {"layers": 2, "width": 32, "heads": 2, "seed": 0}, len(tokenizer)
    )
    with torch.no_grad():
        norm = model.encoder.layer[0].output.LayerNorm
        if massive:
            norm.weight[MASSIVE_DIM] = MASSIVE_GAMMA
        else:
            norm.bias[OUTLIER_DIM] = OUTLIER_BIAS
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
