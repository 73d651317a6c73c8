"""Queries and keys per head (Godey, de la Clergerie & Sagot 2023, arXiv 2306.07656).

Godey et al. trace anisotropy to the attention: during training the mean query and the mean key
of a head drift away from the origin and align (or anti-align), so every query "sees" the same
common key direction and attention becomes sharp. Per layer and head, over all non-padding
tokens of the corpus:

- ||mean q|| and ||mean k|| (norms of the average query / key vector of the head),
- cos(mean q, mean k),
- attention entropy: mean over query tokens of -sum_j a_ij log a_ij (nats), and the same divided
  by log(number of attendable keys) (1 = uniform; queries with a single key are skipped).

Queries and keys are captured with forward hooks on the real projection modules (BERT:
``encoder.layer.i.attention.self.query/key``; GPT-2: ``h.i.attn.c_attn`` split into q | k | v),
so they include the projection biases. Compare trained weights with a random-init copy
(``backend.engine.models.random_like``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from backend.engine.arch import architecture
from backend.engine.device import to_numpy
from backend.engine.errors import UnsupportedModelError
from backend.engine.extraction import forward_batches, tokenize
from backend.engine.hooks import forward_hooks
from backend.engine.models import LoadedModel
from backend.engine.progress import Progress

METRICS = {
    "mean_q_norm": "‖mean query‖",
    "mean_k_norm": "‖mean key‖",
    "cos_qk": "cos(mean query, mean key)",
    "entropy": "attention entropy (nats)",
    "entropy_norm": "attention entropy / log(#keys)",
}


@dataclass(frozen=True)
class QKStats:
    """Per-head statistics, each float64 (L, H) (layer index 0 = layer 1)."""

    mean_q_norm: np.ndarray
    mean_k_norm: np.ndarray
    cos_qk: np.ndarray
    entropy: np.ndarray
    entropy_norm: np.ndarray
    num_tokens: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k).tolist() for k in METRICS} | {
            "num_tokens": self.num_tokens,
            "label": self.label,
        }

    def frame(self):
        import pandas as pd  # lazy: a slow import that only the table views need

        layers, heads = self.cos_qk.shape
        data = {
            "layer": np.repeat(np.arange(1, layers + 1), heads),
            "head": np.tile(np.arange(heads), layers),
        }
        data |= {k: getattr(self, k).ravel() for k in METRICS}
        frame = pd.DataFrame(data)
        frame.insert(0, "model", self.label)
        return frame


def _projections(
    loaded: LoadedModel,
) -> tuple[str, list[tuple[torch.nn.Module, ...]], int, int, list[float]]:
    """(kind, per-layer modules, heads, head_dim, per-layer logit scaling) from the architecture map.

    ``kind`` is "bert" (separate query/key modules) or "gpt2" (one fused ``q | k | v`` module).
    Rotary models are refused: their projections are captured before RoPE rotates them, so the
    logits rebuilt from them would not be the model's.
    """
    try:
        arch = architecture(loaded)
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(f"the queries/keys view cannot read this model: {exc}") from exc
    if arch.position_kind == "rotary" or arch.num_kv_heads != arch.num_heads:
        raise UnsupportedModelError(
            f"the queries/keys view supports models with one key per query head and no rotary "
            f"positions (BERT family, GPT-2, OPT); {loaded.info.architecture} "
            f"({loaded.info.model_type}) has {arch.position_kind} positions"
            + (f" and {arch.num_kv_heads} key heads" if arch.num_kv_heads != arch.num_heads else "")
        )
    if all(layer.fused_qkv is not None for layer in arch.layers):
        kind, modules = "gpt2", [(layer.fused_qkv,) for layer in arch.layers]
    elif all(layer.query is not None and layer.key is not None for layer in arch.layers):
        kind, modules = "bert", [(layer.query, layer.key) for layer in arch.layers]
    else:
        raise UnsupportedModelError(
            f"the queries/keys view needs separate query/key modules or a fused q|k|v module; "
            f"{arch.family.name} has neither"
        )
    scales = [arch.scaling(layer) for layer in arch.layers]
    return kind, modules, arch.num_heads, arch.head_dim, scales


def qk_stats(
    loaded: LoadedModel,
    texts: tuple[str, ...] | list[str],
    max_length: int = 64,
    batch_size: int = 16,
    label: str = "",
    progress: Progress | None = None,
) -> QKStats:
    """Godey et al.'s query/key statistics of every head on ``texts`` (non-padding tokens)."""
    kind, modules, heads, head_dim, scales = _projections(loaded)
    d = heads * head_dim
    num_layers = len(modules)
    captured: dict[tuple[int, str], torch.Tensor] = {}

    def make_hook(i: int, name: str):
        def hook(module, args, output):
            captured[(i, name)] = output

        return hook

    hooks: dict[torch.nn.Module, Any] = {}
    for i, mods in enumerate(modules):
        if kind == "bert":
            hooks[mods[0]] = make_hook(i, "q")
            hooks[mods[1]] = make_hook(i, "k")
        else:
            hooks[mods[0]] = make_hook(i, "qkv")

    q_sum = np.zeros((num_layers, heads, head_dim))
    k_sum = np.zeros((num_layers, heads, head_dim))
    ent_sum = np.zeros((num_layers, heads))
    ent_norm_sum = np.zeros((num_layers, heads))
    n_tokens = 0
    n_norm = 0
    causal = kind == "gpt2" or loaded.info.is_causal
    # Hooks go on the shared, cached model: enter before tokenize() and the forward pass, either of
    # which can raise, so that no hook outlives this call.
    with forward_hooks(hooks):
        tokenized = tokenize(loaded, tuple(texts), max_length)
        for _, _, mask in forward_batches(loaded, tokenized, batch_size, progress):
            valid = mask  # (B, T) bool
            seq = valid.shape[1]
            allowed = valid[:, None, :].expand(-1, seq, -1)  # (B, Tq, Tk): keys that exist
            if causal:
                allowed = allowed & torch.ones(seq, seq, dtype=torch.bool).tril()
            n_keys = allowed.sum(-1).double()  # (B, T)
            n_tokens += int(valid.sum())
            for i in range(num_layers):
                if kind == "bert":
                    q, k = captured[(i, "q")], captured[(i, "k")]
                else:
                    qkv = captured[(i, "qkv")]
                    q, k = qkv[..., :d], qkv[..., d : 2 * d]
                q = q.to("cpu", torch.float64).reshape(
                    *valid.shape, heads, head_dim
                )  # (B, T, H, dh)
                k = k.to("cpu", torch.float64).reshape(*valid.shape, heads, head_dim)
                q_sum[i] += to_numpy(q[valid].sum(0))
                k_sum[i] += to_numpy(k[valid].sum(0))
                logits = torch.einsum("bihd,bjhd->bhij", q, k) * scales[i]
                logits = logits.masked_fill(~allowed[:, None], float("-inf"))
                logp = torch.log_softmax(logits, dim=-1)
                entropy = -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(-1)  # (B, H, T)
                entropy = entropy.transpose(1, 2)[valid]  # (tokens, H)
                ent_sum[i] += to_numpy(entropy.sum(0))
                multi = n_keys[valid] > 1
                ent_norm_sum[i] += to_numpy(
                    (entropy[multi] / torch.log(n_keys[valid][multi])[:, None]).sum(0)
                )
            n_norm += int((n_keys[valid] > 1).sum())
    mean_q = q_sum / max(n_tokens, 1)
    mean_k = k_sum / max(n_tokens, 1)
    q_norm = np.linalg.norm(mean_q, axis=-1)
    k_norm = np.linalg.norm(mean_k, axis=-1)
    cos = (mean_q * mean_k).sum(-1) / np.maximum(q_norm * k_norm, 1e-300)
    return QKStats(
        mean_q_norm=q_norm,
        mean_k_norm=k_norm,
        cos_qk=cos,
        entropy=ent_sum / max(n_tokens, 1),
        entropy_norm=ent_norm_sum / max(n_norm, 1),
        num_tokens=n_tokens,
        label=label or loaded.info.display_name,
    )
