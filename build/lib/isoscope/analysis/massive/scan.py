"""The scan over a corpus: one pass of a text model that measures massive activations (Sun et al.
2024, :mod:`isoscope.analysis.massive.massive`), attention sinks
(:mod:`isoscope.analysis.massive.sinks`) and LLM.int8-style outlier features
(:mod:`isoscope.analysis.massive.int8`) together.

:func:`scan_massive` runs the model over the corpus (eager attention, hidden states and norm
hooks together, then the hidden states once more for the exact median) and returns the three
readings, plus the outliers inside the mixers (:mod:`isoscope.analysis.massive.inner`), in one
:class:`MassiveScan`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from isoscope.analysis.massive.inner import InnerReading, mixer_hooks
from isoscope.analysis.massive.int8 import Int8Accumulator, Int8Stats, int8_sites
from isoscope.analysis.massive.massive import MassiveAccumulator, MassiveStats
from isoscope.analysis.massive.params import MASSIVE_BATCH_SIZE, MASSIVE_MAX_LENGTH
from isoscope.analysis.massive.sinks import (
    SinkStats,
    attention_weights_of,
    eager_attention,
    sink_accumulator,
)
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.budget.batching import plan_batches
from isoscope.engine.budget.progress import Progress, counter
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import (
    TokenizedCorpus,
    pad_batch,
    pad_token_id,
    residual_states,
    run_encoder,
    tokenize,
)
from isoscope.engine.extraction.stats import accumulation_device
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names

ATTENTION_BYTES = 1 << 30  # cap on the attention weights of one batch (all layers)


@dataclass(frozen=True)
class MassiveScan:
    """One pass of a model over a corpus: massive activations, attention sinks, int8 features.

    ``sinks`` is None when the model has no softmax-attention layer or returns no attention
    weights, ``int8`` None when it has no per-layer norms; ``notes`` says why. ``inner``: the
    outliers inside the mixers (norms in mixers, state-space mixers' internal inputs;
    ``isoscope.analysis.massive.inner``), None when the model has no such site.
    """

    massive: MassiveStats
    sinks: SinkStats | None
    int8: Int8Stats | None
    n_texts: int
    n_tokens: int
    max_length: int
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    inner: InnerReading | None = None


def _padded(tokenized: TokenizedCorpus, rows: np.ndarray, pad_id: int):
    """The extraction's padding rule (:func:`isoscope.engine.extraction.pad_batch`), with a
    boolean mask and the rows' lengths."""
    ids, mask = pad_batch(tokenized, rows, pad_id)
    return ids, mask.astype(bool), tokenized.lengths[rows]


def scan_massive(
    loaded: LoadedModel,
    texts: list[str] | tuple[str, ...],
    *,
    max_length: int = MASSIVE_MAX_LENGTH.default,
    batch_size: int = MASSIVE_BATCH_SIZE.default,
    sinks: bool = True,
    int8: bool = True,
    progress: Progress | None = None,
) -> MassiveScan:
    """Massive activations, attention sinks and int8-style outlier features in one pass.

    Every non-padding position is included (the first one too). Texts are sorted by length and
    right-padded; the batch size is lowered so that one batch's attention weights stay under
    1 GiB. Reductions happen on the model's device; only (S, 3) tops, histograms and the few
    activations above 100 come back to the host.
    """
    started = time.perf_counter()
    tokenized = tokenize(loaded, tuple(texts), max_length)
    num_states = loaded.info.num_layers + 1
    names = hidden_state_names(loaded.info.num_layers)
    device = loaded.device
    notes: list[str] = []
    pattern = _layer_pattern(loaded)
    sink_acc = None
    if sinks:
        sink_acc = sink_accumulator(loaded.info.num_layers, pattern, notes)
        sinks = sink_acc is not None
    if sinks:
        batch_size = _attention_batch_size(loaded, int(tokenized.lengths.max()), batch_size)
    massive = MassiveAccumulator(num_states, accumulation_device(device))
    int8_acc, hooks = _int8_hooks(loaded, notes) if int8 else (None, {})
    inner_acc, inner_hooks, inner_pre_hooks = (
        mixer_hooks(
            loaded, pattern, {s.path for s in _int8_paths(loaded)}, accumulation_device(device)
        )
        if int8
        else (None, {}, {})
    )
    pad_id = pad_token_id(loaded)
    encoder = loaded.encoder
    batches = plan_batches(tokenized.lengths, batch_size, group=tokenized.group)
    advance = counter(progress, 2 * len(tokenized.input_ids))  # two passes over the texts
    attention_missing = False
    with (
        forward_hooks(hooks),
        forward_hooks(inner_hooks),
        forward_hooks(inner_pre_hooks, pre=True),
        torch.inference_mode(),
    ):
        context = eager_attention(encoder) if sinks else _null()
        with context:
            for rows in batches:
                ids, mask, lengths = _padded(tokenized, rows, pad_id)
                mask_t = torch.from_numpy(mask).to(device)
                if int8_acc is not None:
                    int8_acc.mask = mask_t
                    int8_acc.add_tokens(int(mask.sum()))
                if inner_acc is not None:
                    inner_acc.mask = mask_t
                out = run_encoder(
                    loaded,
                    ids,
                    mask_t.long(),
                    output_hidden_states=True,
                    output_attentions=bool(sinks),
                )
                hidden = _stacked_states(loaded, out, num_states, ids.shape[1])[:, mask_t]
                massive.update(hidden.to(massive.device), _token_meta(ids, mask, rows, lengths))
                if sink_acc is not None:
                    weights = attention_weights_of(
                        getattr(out, "attentions", None),
                        sink_acc.layers or tuple(range(1, loaded.info.num_layers + 1)),
                        loaded.info.num_layers,
                        ids.shape[1],
                    )
                    if weights is None:
                        attention_missing = True
                    else:
                        sink_acc.update(weights, torch.from_numpy(lengths))
                advance(len(rows))
    if massive.n_tokens:  # second pass: the exact median |h| (and counts past MAX_CANDIDATES)
        massive.begin_refine()
        with torch.inference_mode():
            for rows in batches:
                ids, mask, lengths = _padded(tokenized, rows, pad_id)
                mask_t = torch.from_numpy(mask).to(device)
                out = run_encoder(loaded, ids, mask_t.long(), output_hidden_states=True)
                hidden = _stacked_states(loaded, out, num_states, ids.shape[1])[:, mask_t]
                massive.refine(hidden.to(massive.device))
                advance(len(rows))
    sink_stats = None
    if sink_acc is not None and (attention_missing or sink_acc.total is None):
        notes.append(
            f"attention sinks skipped: {loaded.info.architecture} returned no attention weights "
            "(it cannot switch to eager attention)"
        )
    elif sink_acc is not None:
        sink_stats = sink_acc.finish()
    stats = massive.finish(names, loaded.tokenizer.convert_ids_to_tokens)
    if stats.n_tokens == 0:
        raise InputError("the texts produced no tokens; give real text")
    return MassiveScan(
        massive=stats,
        sinks=sink_stats,
        int8=int8_acc.finish() if int8_acc is not None else None,
        n_texts=len(tokenized.input_ids),
        n_tokens=stats.n_tokens,
        max_length=tokenized.max_length,
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
        inner=inner_acc.finish() if inner_acc is not None else None,
    )


def _attention_batch_size(loaded: LoadedModel, width: int, batch_size: int) -> int:
    """``batch_size`` lowered so that one batch's attention weights (L, heads, T, T float32 per
    text) stay under ``ATTENTION_BYTES``."""
    heads = max(loaded.info.num_heads, 1)
    per_text = loaded.info.num_layers * heads * width * width * 4
    return max(1, min(batch_size, ATTENTION_BYTES // max(per_text, 1)))


def _int8_hooks(loaded: LoadedModel, notes: list[str]) -> tuple[Int8Accumulator | None, dict]:
    """The int8 accumulator and its hooks on every int8 site (none, with a note, when the model's
    sites cannot be found)."""
    try:
        sites = int8_sites(loaded)
    except UnsupportedModelError as exc:
        notes.append(f"int8 outlier features skipped: {exc}")
        return None, {}
    if not sites:
        return None, {}
    acc = Int8Accumulator([s.name for s in sites], loaded.info.hidden_size, loaded.device)
    return acc, {s.module: acc.hook(i) for i, s in enumerate(sites)}


def _layer_pattern(loaded: LoadedModel):
    """The model's layer pattern (``isoscope.engine.arch.layer_pattern``), or None when it cannot
    be read (the views then treat every layer as attention)."""
    from isoscope.engine.arch import layer_pattern

    try:
        return layer_pattern(loaded)
    except UnsupportedModelError:
        return None


def _int8_paths(loaded: LoadedModel) -> list:
    try:
        return int8_sites(loaded)
    except UnsupportedModelError:
        return []


def _stacked_states(loaded: LoadedModel, out: Any, num_states: int, width: int) -> torch.Tensor:
    """(S, B, T, d): the forward pass's hidden states, all ``num_states`` of them, read as the
    extraction reads them (:func:`isoscope.engine.extraction.residual_states`): a model with
    several AltUp copies of the residual stream (Gemma 3n) at its active stream, and state L the
    model's ``last_hidden_state``."""
    hidden_states = getattr(out, "hidden_states", None)
    if not hidden_states or len(hidden_states) != num_states:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} did not return {num_states} hidden states; "
            "massive activations need a model that supports output_hidden_states"
        )
    return torch.stack(residual_states(out, loaded.encoder, width))


def _token_meta(
    ids: np.ndarray, mask: np.ndarray, rows: np.ndarray, lengths: np.ndarray
) -> torch.Tensor:
    """(N, 3) int64 (text, position, token id) of a batch's N real tokens, in text order."""
    text_ids = np.repeat(rows, lengths)
    positions = np.concatenate([np.arange(n) for n in lengths])
    return torch.from_numpy(np.column_stack([text_ids, positions, ids[mask]]))


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None
