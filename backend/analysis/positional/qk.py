"""Queries and keys per head (Godey, de la Clergerie & Sagot 2023, arXiv 2306.07656).

Godey et al. trace anisotropy to the attention: during training the mean query and the mean key
of a head drift away from the origin and align (or anti-align), so every query "sees" the same
common key direction and attention becomes sharp. Per layer and query head, over all non-padding
tokens of the corpus:

- ||mean q|| and ||mean k|| (norms of the average query / key vector of the head),
- cos(mean q, mean k),
- attention entropy: mean over query tokens of -sum_j a_ij log a_ij (nats), and the same divided
  by log(number of attendable keys) (1 = uniform; queries with a single key are skipped).

Queries and keys are captured as the attention uses them (:mod:`isoscope.engine.arch.qk_capture`):
after the projection biases, the q/k norms (Qwen3, OLMo-2) and the rotary embedding; at the call
of transformers' attention function, or, for attention written in a modeling file's own code, as
the operands of the product whose softmax is the attention (:mod:`isoscope.engine.arch.scores`). The
attention weights, and so the entropy, are the model's own under its own mask (causal, sliding
window where the config has one, padding).

- **Grouped-query attention** (Ainslie et al. 2023): H query heads share G key heads; query head h
  attends with key head floor(h / (H / G)). Every statistic is per query head, against its own key
  head (``kv_head``).
- **Rotary positions** (Su et al. 2021, RoFormer, arXiv 2104.09864): q_m = R(m) W_q x_m. The mean
  of the rotated queries mixes positions; before rotation it is the projection's own drift.
  ``rotation="applied"`` (the vectors the attention multiplies) or ``"before"`` (taken back by the
  model's own ``apply_rotary_pos_emb`` at the opposite angle).

Compare trained weights with a random-init copy (``isoscope.engine.load.models.random_like``).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
import torch

from isoscope.analysis.massive.sinks import eager_attention
from isoscope.analysis.positional.params import QK_BATCH_SIZE, QK_MAX_LENGTH
from isoscope.engine.arch import blocks_of, position_kind
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.arch.qk_capture import (
    QK_LAYOUTS,
    attention_calls,
    block_index,
    layout_of,
    projection_calls,
    rotate,
    uses_attention_interface,
)
from isoscope.engine.arch.scores import score_calls
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import forward_batches, tokenize
from isoscope.engine.load.models import LoadedModel

METRICS = {
    "mean_q_norm": "‖mean query‖",
    "mean_k_norm": "‖mean key‖",
    "cos_qk": "cos(mean query, mean key)",
    "entropy": "attention entropy (nats)",
    "entropy_norm": "attention entropy / log(#keys)",
}
ROTATIONS = ("applied", "before")
NO_ROTARY = "no rotary positions"


@dataclass(frozen=True)
class QKStats:
    """Per query head statistics, each float64 (L', H), one row per softmax-attention layer
    (``layers``: their numbers 1..L, every layer when None; ``other_layers``: the layers without
    softmax attention and their kind); ``kv_head`` (H,) the key head each query head attends
    with; ``rotation``: "applied", "before" or "no rotary positions"; ``capture``: where q and k
    were read; ``mask``: the mask of the entropy."""

    mean_q_norm: np.ndarray
    mean_k_norm: np.ndarray
    cos_qk: np.ndarray
    entropy: np.ndarray
    entropy_norm: np.ndarray
    kv_head: np.ndarray
    num_tokens: int
    label: str
    rotation: str = NO_ROTARY
    capture: str = ""
    mask: str = ""
    layers: tuple[int, ...] | None = None
    other_layers: dict[int, str] = field(default_factory=dict)

    @property
    def layer_numbers(self) -> tuple[int, ...]:
        """The layer (1..L) of each row: the softmax-attention layers (every layer when None)."""
        return self.layers or tuple(range(1, self.cos_qk.shape[0] + 1))

    @property
    def num_kv_heads(self) -> int:
        return int(self.kv_head.max()) + 1 if self.kv_head.size else 0

    def settings(self) -> dict[str, Any]:
        return {
            "rotation": self.rotation,
            "capture": self.capture,
            "mask": self.mask,
            "num_heads": int(self.kv_head.size),
            "num_kv_heads": self.num_kv_heads,
            "layers": list(self.layer_numbers),
            "other_layers": {str(k): v for k, v in self.other_layers.items()},
        }

    def to_dict(self) -> dict[str, Any]:
        return (
            {k: getattr(self, k).tolist() for k in METRICS}
            | {"kv_head": self.kv_head.tolist()}
            | self.settings()
            | {"num_tokens": self.num_tokens, "label": self.label}
        )

    def frame(self):
        import pandas as pd  # lazy: a slow import that only the table views need

        layers, heads = self.cos_qk.shape
        data = {
            "layer": np.repeat(np.array(self.layer_numbers), heads),
            "head": np.tile(np.arange(heads), layers),
            "kv_head": np.tile(self.kv_head, layers),
        }
        data |= {k: getattr(self, k).ravel() for k in METRICS}
        frame = pd.DataFrame(data)
        frame.insert(0, "model", self.label)
        return frame


class _Sums:
    """Running sums over the non-padding query tokens, per layer."""

    def __init__(self, num_layers: int):
        self.q: list[np.ndarray | None] = [None] * num_layers  # (H, d_h)
        self.k: list[np.ndarray | None] = [None] * num_layers  # (G, d_h)
        self.entropy: list[np.ndarray | None] = [None] * num_layers  # (H,)
        self.entropy_norm: list[np.ndarray | None] = [None] * num_layers
        self.n_norm: list[np.ndarray | None] = [None] * num_layers
        self.tokens = [0] * num_layers

    def add(self, layer, q, k, weights, allowed, valid) -> None:
        """q (B, H, T, d_h), k (B, G, T, d_h), weights (B, H, T, T), allowed (B, 1|H, T, T) or
        None (then the keys with weight > 0), valid (B, T) bool: the query tokens that count."""
        q_tok = q.transpose(1, 2)[valid]  # (N, H, d_h)
        k_tok = k.transpose(1, 2)[valid]  # (N, G, d_h)
        entropy = -torch.special.xlogy(weights, weights).sum(-1)  # (B, H, T)
        keys = (weights > 0 if allowed is None else allowed).sum(-1).double()  # (B, 1|H, T)
        entropy = entropy.transpose(1, 2)[valid]  # (N, H)
        keys = keys.transpose(1, 2)[valid].expand_as(entropy)  # (N, H)
        multi = keys > 1
        normed = torch.where(multi, entropy / torch.log(keys.clamp_min(2)), 0.0)
        parts = {
            "q": q_tok.sum(0),
            "k": k_tok.sum(0),
            "entropy": entropy.sum(0),
            "entropy_norm": normed.sum(0),
            "n_norm": multi.sum(0).double(),
        }
        for name, value in parts.items():
            held = getattr(self, name)
            held[layer] = to_numpy(value) + (0.0 if held[layer] is None else held[layer])
        self.tokens[layer] += int(valid.sum())


def shared_key_heads(k: torch.Tensor) -> torch.Tensor:
    """Keys a layout copied to every query head (Falcon's new decoder architecture broadcasts its
    G key heads), (B, H, T, d_h), back to (B, G, T, d_h): the longest runs of equal heads."""
    heads = k.shape[1]
    for run in range(heads, 1, -1):
        if heads % run:
            continue
        grouped = k.reshape(k.shape[0], heads // run, run, *k.shape[2:])
        if bool((grouped == grouped[:, :, :1]).all()):
            return grouped[:, :, 0]
    return k


def _describe_mask(loaded: LoadedModel) -> str:
    config = loaded.model.config
    window = getattr(config, "sliding_window", None)
    kind = "causal" if loaded.info.is_causal else "bidirectional"
    text = f"the model's own ({kind}, padding excluded"
    if isinstance(window, int) and window > 0:
        text += f", sliding window of {window} on the layers that use one"
    return text + ")"


def _projection_layouts(loaded: LoadedModel) -> list:
    found = blocks_of(loaded.model)
    layouts = [layout_of(block) for block in found[1]] if found else []
    if not layouts or any(entry is None for entry in layouts):
        raise UnsupportedModelError(
            f"the queries/keys view found neither an attention call it can record (transformers' "
            f"attention functions) nor a known q/k projection layout in "
            f"{loaded.info.architecture} ({loaded.info.model_type}); known layouts: "
            + "; ".join(layout.name for layout in QK_LAYOUTS)
        )
    return layouts


def _head_dim(loaded: LoadedModel) -> int:
    config = loaded.model.config
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    return int(getattr(config, "head_dim", 0) or (hidden // heads if heads else 0))


def qk_stats(
    loaded: LoadedModel,
    texts: tuple[str, ...] | list[str],
    max_length: int = QK_MAX_LENGTH.default,
    batch_size: int = QK_BATCH_SIZE.default,
    label: str = "",
    progress: Progress | None = None,
    rotation: str = "applied",
) -> QKStats:
    """Godey et al.'s query/key statistics of every query head on ``texts`` (non-padding tokens),
    with the model's rotary embedding ``applied`` or from ``before`` it (see the module doc)."""
    if rotation not in ROTATIONS:
        raise InputError(f"rotation must be one of {', '.join(ROTATIONS)}, not {rotation!r}")
    model = loaded.model
    num_layers = _layer_count(loaded)
    attention_layers, other_layers, latent = _attention_layers(loaded, num_layers)
    rotary = position_kind(loaded) == "rotary"
    if latent and rotary and rotation == "before":
        raise UnsupportedModelError(
            f"{loaded.info.architecture} uses latent attention (MLA), whose decoupled rotary part "
            "is split off, rotated and joined back inside the attention: its queries/keys are "
            "shown as the attention multiplies them; choose rotation 'applied'"
        )
    sums = _Sums(num_layers)
    valid: list[torch.Tensor] = []  # the current batch's token mask (B, T), set by a pre-hook

    def keep_mask(module, args, kwargs):
        mask = kwargs.get("attention_mask")
        if mask is None:  # no padding: every token counts
            mask = torch.ones(kwargs["input_ids"].shape, dtype=torch.bool)
        valid[:] = [mask.detach().to("cpu").bool()]

    def on_call(call) -> None:
        if call.layer < 0:  # an attention outside the blocks (none in the families known)
            return
        q, k = call.q, call.k
        if rotary and rotation == "before":
            q, k = rotate(call.module, q, k, call.position_embeddings, inverse=True)
        sums.add(call.layer, q, k, call.weights, call.allowed, valid[0])

    how = _capture_kind(loaded, rotary, rotation)
    if how == "projections" and other_layers:
        raise UnsupportedModelError(
            f"{loaded.info.architecture} mixes attention with "
            f"{', '.join(sorted(set(other_layers.values())))} layers and rotates its queries/keys "
            "in its own attention code; the queries/keys view reads such a hybrid's queries/keys "
            "only as the attention multiplies them: choose rotation 'applied'"
        )
    # the projections' q and k (before rotation) and the scores' weights, per layer of one pass
    projected: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    scored: dict[int, torch.Tensor] = {}
    position_embeddings: dict[torch.nn.Module, Any] = {}
    index = block_index(model) if how != "call" else {}

    def on_layer(i, q, k, attention) -> None:
        k = shared_key_heads(k.detach().to("cpu", torch.float64))
        projected[i] = (q.detach().to("cpu", torch.float64), k)

    def on_scores(call) -> None:
        layer = index.get(call.module, -1)
        if layer < 0:
            return
        weights = call.weights.detach().to("cpu", torch.float64)
        if how == "projections":
            scored[layer] = weights
            return
        q = call.q.detach().to("cpu", torch.float64)
        k = shared_key_heads(call.k.detach().to("cpu", torch.float64))
        sums.add(layer, q, k, weights, None, valid[0])

    partial: dict[int, tuple[int, ...]] = {}  # layer -> scores normalised over part of the text

    def on_other(module, shape) -> None:
        layer = index.get(module, -1)
        if layer >= 0:
            partial.setdefault(layer, shape)

    def on_output(module, args, kwargs, output) -> None:
        for i in sorted(projected.keys() & scored.keys()):
            sums.add(i, *projected[i], scored[i], None, valid[0])
        projected.clear()
        scored.clear()

    output_hooks: dict = {}
    if how == "call":
        capture = "the attention call (as the attention function receives them)"
        context = attention_calls(model, on_call)
    elif how == "scores":
        capture = "the attention scores (the operands of the product the softmax reads)"
        context = score_calls(loaded.encoder, on_scores, on_other)
    else:
        layouts = _projection_layouts(loaded)
        capture = f"the projections ({layouts[0][0].name})"
        context = projection_calls(model, layouts, _head_dim(loaded), on_layer, position_embeddings)
        output_hooks = {loaded.encoder: on_output}
    # Hooks go on the shared, cached model: enter before tokenize() and the forward pass, either of
    # which can raise, so that no hook outlives this call.
    with (
        eager_attention(model) if how != "call" else nullcontext(),
        context,
        score_calls(loaded.encoder, on_scores) if how == "projections" else nullcontext(),
        forward_hooks({loaded.encoder: keep_mask}, pre=True, with_kwargs=True),
        forward_hooks(output_hooks, with_kwargs=True),
    ):
        tokenized = tokenize(loaded, tuple(texts), max_length)
        for _ in forward_batches(loaded, tokenized, batch_size, progress):
            pass
    watched = how == "scores"
    if how == "call" and any(sums.q[i - 1] is None for i in attention_layers):
        # layers that made no attention call: one batch again, watching their own scores, so
        # that the refusal says what they compute instead
        index = block_index(model)
        batches = cast(Generator, forward_batches(loaded, tokenized, batch_size))
        with eager_attention(model), score_calls(loaded.encoder, lambda call: None, on_other):
            next(batches, None)
        batches.close()
        watched = True
    _check_every_layer(sums, loaded, attention_layers, partial if watched else None)
    stats = _finish(
        sums, loaded, label, rotation if rotary else NO_ROTARY, capture, attention_layers
    )
    if not other_layers:
        return stats
    return replace(stats, layers=attention_layers, other_layers=other_layers)


def _capture_kind(loaded: LoadedModel, rotary: bool, rotation: str) -> str:
    """Where q and k are read: ``"call"`` (transformers' attention function), ``"scores"`` (the
    product the module's own softmax reads) or ``"projections"`` (a known layout: the only way
    to q and k before a rotary embedding applied in the module's own code)."""
    if uses_attention_interface(loaded.model):
        return "call"
    if not (rotary and rotation == "before"):
        return "scores"
    found = blocks_of(loaded.model)
    if found and all(layout_of(block) is not None for block in found[1]):
        return "projections"
    raise UnsupportedModelError(
        f"{loaded.info.architecture} ({loaded.info.model_type}) rotates its queries and keys in "
        "its own attention code, so they are read as its attention multiplies them (after the "
        "rotation); choose rotation 'applied'"
    )


def _attention_layers(
    loaded: LoadedModel, num_layers: int
) -> tuple[tuple[int, ...], dict[int, str], bool]:
    """The softmax-attention layers (1..L) of the layer pattern, the others with their kind, and
    whether some attention is latent (MLA); refused in one line when there is none ("no
    attention layers: Mamba mixers only"). Every layer when the pattern cannot be read."""
    from isoscope.engine.arch import layer_pattern
    from isoscope.engine.arch.mixers import LATENT

    try:
        pattern = layer_pattern(loaded)
    except UnsupportedModelError:
        return tuple(range(1, num_layers + 1)), {}, False
    why = pattern.no_attention_reason()
    if why:
        raise UnsupportedModelError(
            f"{why}: {loaded.info.architecture} has no softmax attention, whose queries and keys "
            "this view reads"
        )
    latent = any(m.kind == LATENT for k in pattern.layers for m in k.mixers)
    return pattern.attention_layers(), pattern.other_layers(), latent


def _layer_count(loaded: LoadedModel) -> int:
    """The number of per-layer blocks; refused for a model whose layers share one module."""
    found = blocks_of(loaded.model)
    if found is None:
        raise UnsupportedModelError(
            f"the queries/keys view needs one module per layer; {loaded.info.architecture} "
            f"({loaded.info.model_type}) shares one layer module across its layers"
        )
    return len(found[1])


def _check_every_layer(
    sums: _Sums,
    loaded: LoadedModel,
    layers: tuple[int, ...],
    partial: dict[int, tuple[int, ...]] | None = None,
) -> None:
    """Refuse in one line when an attention layer gave no queries/keys. ``partial`` (layer
    0-based -> scores shape), where the scores were watched: the layers that normalise scores
    over windows, blocks or chunks of the text rather than over all of it, named as such."""
    missing = [i for i in layers if sums.q[i - 1] is None]
    if not missing:
        return
    where = f"layer(s) {', '.join(map(str, missing))} of {loaded.info.architecture}"
    wanted = "the queries/keys view reads softmax attention over the whole text"
    if partial is not None:
        shapes = [partial[i - 1] for i in missing if i - 1 in partial]
        if shapes:
            shape = " x ".join(map(str, shapes[0]))
            raise UnsupportedModelError(
                f"{where} attend within windows, blocks or chunks of the text (a softmax over "
                f"scores of shape {shape}, not over every pair of tokens); {wanted}"
            )
        raise UnsupportedModelError(
            f"{where} form no softmax over token-by-token scores (attention approximated "
            f"without one, e.g. by hashing, sampling or landmarks); {wanted}"
        )
    raise UnsupportedModelError(
        f"the queries/keys view found no softmax attention over the whole text in {where}: no "
        "attention call and no token-by-token score product that a softmax reads (block-local, "
        "hashed or approximated attention is not read)"
    )


def _finish(
    sums: _Sums,
    loaded: LoadedModel,
    label: str,
    rotation: str,
    capture: str,
    layers: tuple[int, ...] | None = None,
) -> QKStats:
    """The statistics of the attention ``layers`` (1..L; every layer when None)."""
    rows = [i - 1 for i in layers] if layers is not None else list(range(len(sums.q)))

    def stacked(parts: list[np.ndarray | None]) -> np.ndarray:  # every analysed layer has its sums
        return np.stack(cast(list[np.ndarray], [parts[i] for i in rows]))

    def held(parts: list[np.ndarray | None], i: int) -> np.ndarray:  # an analysed layer's sums
        return cast(np.ndarray, parts[i])

    n = max(sums.tokens[rows[0]], 1)
    # per layer, as the head size may differ by layer: mean q (H, d_l), mean k (G, d_l)
    shapes = {(held(sums.q, i).shape[0], held(sums.k, i).shape[0]) for i in rows}
    if len(shapes) > 1:
        raise UnsupportedModelError(
            f"{loaded.info.architecture}'s layers have different numbers of query/key heads "
            f"({', '.join(f'{h}/{g}' for h, g in sorted(shapes))}); the queries/keys view "
            "compares one set of heads across layers"
        )
    ((heads, groups),) = shapes
    if groups == 0 or heads % groups:
        raise UnsupportedModelError(
            f"{heads} query heads cannot share {groups} key heads evenly in "
            f"{loaded.info.architecture}"
        )
    kv_head = np.arange(heads) // (heads // groups)  # GQA: query head h uses key head h // (H/G)
    q_norm: list[np.ndarray] = []
    k_norm: list[np.ndarray] = []
    cos: list[np.ndarray] = []
    for i in rows:
        mean_q = held(sums.q, i) / n  # (H, d_l)
        mean_k = held(sums.k, i)[kv_head] / n  # (H, d_l): each query head's own key head
        q_norm.append(np.linalg.norm(mean_q, axis=-1))
        k_norm.append(np.linalg.norm(mean_k, axis=-1))
        cos.append((mean_q * mean_k).sum(-1) / np.maximum(q_norm[-1] * k_norm[-1], 1e-300))
    return QKStats(  # the per-layer rows stacked: (L', H)
        mean_q_norm=np.stack(q_norm),
        mean_k_norm=np.stack(k_norm),
        cos_qk=np.stack(cos),
        entropy=stacked(sums.entropy) / n,
        entropy_norm=stacked(sums.entropy_norm) / np.maximum(stacked(sums.n_norm), 1),
        kv_head=kv_head,
        num_tokens=sums.tokens[rows[0]],
        label=label or loaded.info.display_name,
        rotation=rotation,
        capture=capture,
        mask=_describe_mask(loaded),
    )
