"""Massive activations in the residual stream, and one pass that also measures sinks and int8 outliers.

Sun, Chen, Kolter & Liu 2024, "Massive Activations in Large Language Models" (arXiv 2402.17762;
code: locuslab/massive-activations): a handful of activations in the hidden states (decoder layer
outputs) are huge, |h| > 100 and about 1000 x the median |h| of that hidden state. They sit in a
few fixed dims, at the first token and at delimiter tokens ("." or "\\n"), appear after the first
few layers, stay nearly constant, and act as fixed biases that turn the attention to those tokens
into a sink. The reference code reports, per layer, the three largest |h| and the median |h|.

Per hidden state (``emb``, 1 .. L; note transformers returns the LAST one after the final norm,
which is why the massive values vanish there) :class:`MassiveStats` holds, over every non-padding
token of the corpus, first position included:

- the 3 largest |h| at distinct (dim, position) sites, with dim, text, position and token: on a
  causal model the first position does not depend on the text, so every text's first token gives
  the same (dim, position, value), and it is listed once (the first text holding it);
- the median |h| over all (token, dim) pairs, exact: the first pass keeps a histogram of log10 |h|
  with 200 bins per decade over [1e-6, 1e5] (on the model's device), a second pass over the same
  batches counts the values below a 3-bin band around the histogram's median and keeps those
  inside it, and the median is selected from them (``median_exact``; should the band hold more
  than 50 million values, the histogram's log-linear estimate, within 1.2 %, is kept);
- ``n_above_100``: the number of activations with |h| > 100 (exact), and ``n_massive``: those with
  |h| > max(100, 1000 x median), exact with the exact median. Every activation above 100 is kept
  (value, dim, text, position, token; up to 2 million in all, after which the second pass keeps
  their values only and the carriers are not attributed), so the massive ones are also
  attributed to their carriers: the first position, delimiter tokens, or other tokens.

:func:`peak_state` is the one rule for "the peak state" (the largest |h|).

:func:`scan_decoder` runs the model over the corpus (eager attention, hidden states and norm
hooks together, then the hidden states once more for the exact median) and returns massive
activations, attention sinks (``backend.analysis.activations.sinks``) and LLM.int8-style outlier features
(``backend.analysis.activations.int8``) in one :class:`DecoderScan`.
"""

from __future__ import annotations

import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from backend.analysis.activations.inner import InnerReading, mixer_hooks
from backend.analysis.activations.int8 import Int8Accumulator, Int8Stats
from backend.analysis.activations.loghist import (
    BINS_PER_DECADE,
    LOG_LO,
    N_BINS,
    bin_edge,
    log_histogram,
    median_bin,
    median_from_histogram,
)
from backend.analysis.activations.params import MASSIVE_BATCH_SIZE, MASSIVE_MAX_LENGTH
from backend.analysis.activations.sinks import (
    SinkStats,
    attention_weights_of,
    eager_attention,
    sink_accumulator,
)
from backend.engine.arch.hooks import forward_hooks
from backend.engine.budget.batching import plan_batches
from backend.engine.budget.progress import Progress, counter
from backend.engine.device import to_numpy
from backend.engine.errors import InputError, UnsupportedModelError
from backend.engine.extraction import (
    TokenizedCorpus,
    encode_text,
    pad_batch,
    pad_token_id,
    residual_states,
    tokenize,
)
from backend.engine.extraction.stats import accumulation_device
from backend.engine.load.models import LoadedModel
from backend.engine.naming import hidden_state_names
from backend.engine.params import MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO

TOP_K = 3
MAX_CANDIDATES = 2_000_000
MAX_BAND = 50_000_000  # values kept per scan for the exact median (second pass)
ATTENTION_BYTES = 1 << 30  # cap on the attention weights of one batch (all layers)

_NEWLINES = ("Ċ", "<0x0A>", "\n", "ĊĊ", "\n\n")


def is_delimiter(token: str) -> bool:
    """Punctuation, newline or whitespace-only tokens ("." "," "\\n" "Ċ" "<0x0A>"): Sun et al.'s
    delimiters."""
    if token in _NEWLINES:
        return True
    core = token.removeprefix("##").strip("Ġ▁Ċ \n\t")
    if not core:
        return bool(token)  # a whitespace/newline marker
    return all(unicodedata.category(c)[0] in "PS" for c in core)


CARRIERS = ("first", "delimiter", "other")  # a decoder's carriers; image models: IMAGE_CARRIERS


def decoder_carrier(position: int, token: str) -> str:
    """Sun et al.'s carriers in a text: the first position, a delimiter, or another token."""
    return "first" if position == 0 else ("delimiter" if is_delimiter(token) else "other")


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class MassiveStats:
    """Massive-activation statistics per hidden state (S = layers + 1, index 0 = ``emb``).

    ``top_value`` float64 (S, 3) descending, with ``top_dim``, ``top_text``, ``top_position``
    (0-based within the text) and ``top_token`` (S, 3); ``median_abs`` (S,); ``n_above_100`` and
    ``n_massive`` (S,) int64; ``threshold`` (S,) = max(100, 1000 x median); ``carriers``: per state
    a dict with the massive activations' counts by carrier (``first``, ``delimiter``, ``other``),
    their most frequent dims and tokens.
    """

    state_names: tuple[str, ...]
    top_value: np.ndarray
    top_dim: np.ndarray
    top_text: np.ndarray
    top_position: np.ndarray
    top_token: np.ndarray
    median_abs: np.ndarray
    n_above_100: np.ndarray
    n_massive: np.ndarray
    threshold: np.ndarray
    carriers: tuple[dict, ...]
    massive_exact: bool
    n_tokens: int
    median_exact: bool = False

    @property
    def ratio(self) -> np.ndarray:
        """Largest |h| over the median |h| per state."""
        return self.top_value[:, 0] / np.maximum(self.median_abs, 1e-12)

    def layers(self) -> list[dict]:
        """The CLI's ``layers`` list: index, name, median_abs, top [{value, dim, position, token}],
        n_massive."""
        out = []
        for s, name in enumerate(self.state_names):
            top = [
                {
                    "value": float(self.top_value[s, k]),
                    "dim": int(self.top_dim[s, k]),
                    "position": int(self.top_position[s, k]),
                    "token": str(self.top_token[s, k]),
                }
                for k in range(self.top_value.shape[1])
                if np.isfinite(self.top_value[s, k])
            ]
            out.append(
                {
                    "index": s,
                    "name": name,
                    "median_abs": float(self.median_abs[s]),
                    "top": top,
                    "n_massive": int(self.n_massive[s]),
                }
            )
        return out


@dataclass(frozen=True)
class DecoderScan:
    """One pass of a model over a corpus: massive activations, attention sinks, int8 features.

    ``sinks`` is None when the model has no softmax-attention layer or returns no attention
    weights, ``int8`` None when it has no per-layer norms; ``notes`` says why. ``inner``: the
    outliers inside the mixers (norms in mixers, state-space mixers' internal inputs;
    ``backend.analysis.activations.inner``), None when the model has no such site.
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


# ----------------------------------------------------------------------------- accumulation


def _median_from_histogram(hist: np.ndarray) -> np.ndarray:
    """Median of each row's log10-|h| histogram (S, N_BINS), log-linear inside the median bin."""
    return median_from_histogram(hist)


def _count_above_from_histogram(hist: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Approximate count of values above ``threshold`` per row (bins wholly above it)."""
    edges = LOG_LO + np.arange(1, N_BINS + 1) / BINS_PER_DECADE  # upper edge of each bin
    lower = edges - 1.0 / BINS_PER_DECADE
    above = lower[None, :] >= np.log10(threshold)[:, None]
    return (hist * above).sum(axis=1)


def _merge_top(old: list[tuple], new: list[tuple]) -> list[tuple]:
    """The TOP_K largest of ``old + new`` (value, dim, text, position, token id) with one entry per
    (dim, position) site: the largest value of each (the earlier one on a tie)."""
    best: dict[tuple[int, int], tuple] = {}
    for item in old + new:
        key = (item[1], item[3])
        if key not in best or item[0] > best[key][0]:
            best[key] = item
    ranked = sorted(best.values(), key=lambda item: -item[0])  # stable: earlier first on ties
    return ranked[:TOP_K]


class MassiveAccumulator:
    """Streams the top-3 distinct (dim, position) sites of |h|, a log-|h| histogram and every
    |h| > 100 per hidden state; :meth:`refine` (a second pass over the same batches, after
    :meth:`begin_refine`) makes the median and the massive counts exact."""

    def __init__(self, num_states: int, device: torch.device) -> None:
        self.num_states = num_states
        self.device = device
        self.top: list[list[tuple]] = [[] for _ in range(num_states)]
        self.hist = torch.zeros(num_states, N_BINS, dtype=torch.int64, device=device)
        self.n_above = torch.zeros(num_states, dtype=torch.int64, device=device)
        self.candidates: list[np.ndarray] = []  # rows (state, dim, text, pos, token id) int64
        self.candidate_values: list[np.ndarray] = []
        self.n_candidates = 0
        self.overflow = False
        self.n_tokens = 0
        self.n_values = 0
        self._band: tuple[torch.Tensor, torch.Tensor] | None = None  # (S,) lo, hi on device
        self._below: torch.Tensor | None = None
        self._band_values: list[list[np.ndarray]] = [[] for _ in range(num_states)]
        self._band_size = 0
        self._big_values: list[list[np.ndarray]] = [[] for _ in range(num_states)]
        self.refined = False
        self.band_overflow = False

    def update(self, hidden: torch.Tensor, meta: torch.Tensor) -> None:
        """``hidden``: (S, N, d) activations of the batch's N non-padding tokens (model device);
        ``meta``: (N, 3) int64 (text id, position, token id) on the CPU."""
        s_count, n, d = hidden.shape
        if n == 0:
            return
        self.n_tokens += n
        self.n_values += n * d  # per state
        positions = meta[:, 1].to(hidden.device)
        n_pos = int(meta[:, 1].max()) + 1
        index = positions[:, None].expand(-1, d)
        found: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        for s in range(s_count):  # one state at a time: (N, d) temporaries, not (S, N, d)
            magnitude = hidden[s].abs().float()  # (N, d)
            self._update_top(s, magnitude, positions, index, n_pos, meta)
            self.hist[s] += log_histogram(magnitude)
            big = magnitude > MASSIVE_ABS_THRESHOLD
            n_big = big.sum()
            self.n_above[s] += n_big
            if not self.overflow and int(n_big):
                found.append((s, torch.nonzero(big), magnitude[big]))
        if self.overflow or not found:
            return
        if self.n_candidates + sum(len(w) for _, w, _ in found) > MAX_CANDIDATES:
            self.overflow = True
            self.candidates.clear()
            self.candidate_values.clear()
            return
        meta_np = to_numpy(meta, dtype=None)
        for s, where, vals in found:
            where = to_numpy(where, dtype=None)  # (m, 2): row, dim
            self.candidates.append(
                np.column_stack([np.full(len(where), s), where[:, 1], meta_np[where[:, 0]]])
            )
            self.candidate_values.append(to_numpy(vals))
            self.n_candidates += len(where)

    def _update_top(self, s, magnitude, positions, index, n_pos, meta) -> None:
        """The batch's largest |h| per (position, dim) site, its top TOP_K sites, merged in."""
        d = magnitude.shape[1]
        per_site = torch.zeros(n_pos, d, dtype=magnitude.dtype, device=magnitude.device)
        per_site.scatter_reduce_(0, index, magnitude, reduce="amax", include_self=False)
        k = min(TOP_K, n_pos * d)
        values, where = per_site.reshape(-1).topk(k)
        new = []
        for value, flat in zip(
            to_numpy(values).tolist(), to_numpy(where, dtype=None).tolist(), strict=True
        ):
            pos, dim = divmod(int(flat), d)
            column = torch.where(positions == pos, magnitude[:, dim], -1.0)
            row = int(column.argmax())  # the first text holding it
            text, position, token = (int(v) for v in meta[row].tolist())
            new.append((float(value), dim, text, position, token))
        self.top[s] = _merge_top(self.top[s], new)

    # ------------------------------------------------------------------ exact median, second pass

    def begin_refine(self) -> None:
        """Fix, per state, a band of 3 histogram bins around the median for :meth:`refine`."""
        hist = to_numpy(self.hist, dtype=None)
        idx = median_bin(hist)
        lo = torch.as_tensor(bin_edge(np.maximum(idx - 1, 0)), device=self.device)
        hi = torch.as_tensor(bin_edge(idx + 2), device=self.device)
        lo = torch.where(torch.as_tensor(idx <= 1, device=self.device), torch.zeros_like(lo), lo)
        self._band = (lo, hi)
        self._below = torch.zeros(self.num_states, dtype=torch.int64, device=self.device)
        self._band_values = [[] for _ in range(self.num_states)]
        self._big_values = [[] for _ in range(self.num_states)]
        self._band_size = 0

    def refine(self, hidden: torch.Tensor) -> None:
        """Second pass over the same tokens: count |h| below each band, keep the values inside it
        (for the exact median) and, if the first pass overflowed, every |h| > 100."""
        assert self._band is not None and self._below is not None
        lo, hi = self._band
        for s in range(hidden.shape[0]):
            magnitude = hidden[s].abs().float().reshape(-1)
            self._below[s] += (magnitude < lo[s]).sum()
            inside = magnitude[(magnitude >= lo[s]) & (magnitude < hi[s])]
            self._band_size += int(inside.numel())
            if self._band_size > MAX_BAND:
                self.band_overflow = True
            elif not self.band_overflow:
                self._band_values[s].append(to_numpy(inside))
            if self.overflow:
                big = magnitude[magnitude > MASSIVE_ABS_THRESHOLD]
                self._big_values[s].append(to_numpy(big))
        self.refined = True

    def _exact_median(self) -> np.ndarray | None:
        if not self.refined or self.band_overflow or self._below is None or not self.n_tokens:
            return None
        n = self.n_values  # values per state
        below = to_numpy(self._below, dtype=None)
        out = np.empty(self.num_states)
        for s in range(self.num_states):
            band = np.sort(np.concatenate(self._band_values[s] or [np.empty(0)]))
            r1, r2 = (n - 1) // 2 - below[s], n // 2 - below[s]
            if r1 < 0 or r2 >= len(band):
                return None  # the histogram bin and the exact comparison disagree: stay approximate
            out[s] = (float(band[r1]) + float(band[r2])) / 2.0
        return out

    def finish(
        self,
        state_names: list[str],
        id_to_token: Callable[[list[int]], list[str]],
        carrier_of: Callable[[int, str], str] = decoder_carrier,
        kinds: tuple[str, ...] = CARRIERS,
    ):
        """The :class:`MassiveStats`; ``carrier_of(position, token)`` names the carrier of a
        massive activation, one of ``kinds`` (a decoder's first / delimiter / other by default)."""
        hist = to_numpy(self.hist, dtype=None)
        exact = self._exact_median()
        median = exact if exact is not None else _median_from_histogram(hist)
        threshold = np.maximum(
            MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO * np.nan_to_num(median, nan=0.0)
        )
        top_value = np.full((self.num_states, TOP_K), np.nan)
        meta = np.full((self.num_states, TOP_K, 4), -1, dtype=np.int64)
        for s, items in enumerate(self.top):
            for k, (value, dim, text, position, token) in enumerate(items):
                top_value[s, k] = value
                meta[s, k] = (dim, text, position, token)
        ids = meta[..., 3]
        tokens = np.array(
            [id_to_token([int(i)])[0] if i >= 0 else "" for i in ids.reshape(-1)], dtype=object
        ).reshape(ids.shape)
        carriers: list[dict] = [
            dict.fromkeys(kinds, 0) | {"dims": [], "tokens": []} for _ in state_names
        ]
        counts_exact = True
        if self.overflow:
            if self.refined:
                n_massive = np.array(
                    [
                        int((np.concatenate(v or [np.empty(0)]) > threshold[s]).sum())
                        for s, v in enumerate(self._big_values)
                    ],
                    dtype=np.int64,
                )
            else:
                n_massive = _count_above_from_histogram(hist, threshold).astype(np.int64)
                counts_exact = False
        else:
            n_massive = np.zeros(self.num_states, dtype=np.int64)
            if self.candidates:
                rows = np.concatenate(self.candidates)
                values = np.concatenate(self.candidate_values)
                massive = values > threshold[rows[:, 0]]
                rows = rows[massive]
                n_massive = np.bincount(rows[:, 0], minlength=self.num_states).astype(np.int64)
                carriers = _carriers(rows, self.num_states, id_to_token, carrier_of, kinds)
        return MassiveStats(
            state_names=tuple(state_names),
            top_value=top_value,
            top_dim=meta[..., 0],
            top_text=meta[..., 1],
            top_position=meta[..., 2],
            top_token=tokens,
            median_abs=median,
            n_above_100=to_numpy(self.n_above, dtype=None).astype(np.int64),
            n_massive=n_massive,
            threshold=threshold,
            carriers=tuple(carriers),
            massive_exact=counts_exact and (exact is not None or not self.refined),
            n_tokens=self.n_tokens,
            median_exact=exact is not None,
        )


def _carriers(
    rows: np.ndarray,
    num_states: int,
    id_to_token,
    carrier_of: Callable[[int, str], str] = decoder_carrier,
    kinds: tuple[str, ...] = CARRIERS,
) -> list[dict]:
    """Per state: massive activations by carrier (``carrier_of(position, token)``, one of
    ``kinds``), top dims and tokens. ``rows``: (m, 5) int64 (state, dim, text, position, token id)."""
    vocab: dict[int, str] = {}
    out = []
    for s in range(num_states):
        mine = rows[rows[:, 0] == s]
        counts = dict.fromkeys(kinds, 0)
        tokens: Counter[str] = Counter()
        for position, tid in mine[:, 3:5].tolist():
            if tid not in vocab:
                vocab[tid] = id_to_token([tid])[0]
            token = vocab[tid]
            counts[carrier_of(position, token)] += 1
            tokens[token] += 1
        dims = Counter(mine[:, 1].tolist())
        out.append(
            counts
            | {
                "dims": [[int(k), int(v)] for k, v in dims.most_common(5)],
                "tokens": [[k, int(v)] for k, v in tokens.most_common(5)],
            }
        )
    return out


# ----------------------------------------------------------------------------- the pass


def _padded(tokenized: TokenizedCorpus, rows: np.ndarray, pad_id: int):
    """The extraction's padding rule (:func:`backend.engine.extraction.pad_batch`), with a
    boolean mask and the rows' lengths."""
    ids, mask = pad_batch(tokenized, rows, pad_id)
    return ids, mask.astype(bool), tokenized.lengths[rows]


def int8_sites(loaded: LoadedModel) -> list:
    """The norms (``backend.analysis.layernorm.params``) whose outputs are the inputs of projections
    inside the Transformer blocks (the traced wiring of :func:`backend.engine.arch.wiring`): exactly
    LLM.int8's measurement points. Gemma-2/3's post-attention / post-feedforward norms, whose
    outputs only join the residual stream, are not sites."""
    from backend.analysis.layernorm.params import find_norms

    sites = find_norms(
        loaded.model,
        num_layers=loaded.info.num_layers,
        width=loaded.info.hidden_size,
        parametric=False,
    )
    return [site for site in sites if site.feeds_projections]


def peak_state(stats: MassiveStats) -> int:
    """The peak state of a massive-activation scan: the hidden state holding the largest |h|
    (its top value). The one rule the decoder page, the CLI and the report use."""
    values = np.nan_to_num(np.asarray(stats.top_value[:, 0], dtype=np.float64), nan=-np.inf)
    return int(np.argmax(values))


def scan_decoder(
    loaded: LoadedModel,
    texts: list[str] | tuple[str, ...],
    *,
    max_length: int = MASSIVE_MAX_LENGTH.default,
    batch_size: int = MASSIVE_BATCH_SIZE.default,
    sinks: bool = True,
    int8: bool = True,
    progress: Progress | None = None,
) -> DecoderScan:
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
    extra = {"use_cache": False} if getattr(encoder.config, "use_cache", None) is not None else {}
    batches = plan_batches(tokenized.lengths, batch_size)  # the one batching rule
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
                out = encoder(
                    input_ids=torch.from_numpy(ids).to(device),
                    attention_mask=mask_t.long(),
                    output_hidden_states=True,
                    output_attentions=bool(sinks),
                    **extra,
                )
                hidden = _stacked_states(loaded, out, num_states)[:, mask_t]  # (S, N, d)
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
                out = encoder(
                    input_ids=torch.from_numpy(ids).to(device),
                    attention_mask=mask_t.long(),
                    output_hidden_states=True,
                    **extra,
                )
                hidden = _stacked_states(loaded, out, num_states)[:, mask_t]
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
    return DecoderScan(
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
    """The model's layer pattern (``backend.engine.arch.layer_pattern``), or None when it cannot
    be read (the views then treat every layer as attention, as before the pattern existed)."""
    from backend.engine.arch import layer_pattern

    try:
        return layer_pattern(loaded)
    except UnsupportedModelError:
        return None


def _int8_paths(loaded: LoadedModel) -> list:
    try:
        return int8_sites(loaded)
    except UnsupportedModelError:
        return []


def _stacked_states(loaded: LoadedModel, out: Any, num_states: int) -> torch.Tensor:
    """(S, B, T, d): the forward pass's hidden states, all ``num_states`` of them, read as the
    extraction reads them (:func:`backend.engine.extraction.residual_states`): a model with
    several AltUp copies of the residual stream (Gemma 3n) at its active stream, and state L the
    model's ``last_hidden_state``."""
    hidden_states = getattr(out, "hidden_states", None)
    if not hidden_states or len(hidden_states) != num_states:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} did not return {num_states} hidden states; "
            "massive activations need a model that supports output_hidden_states"
        )
    return torch.stack(residual_states(out, loaded.encoder))


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


# ----------------------------------------------------------------------------- one text


@dataclass(frozen=True)
class TextMagnitudes:
    """|h| of one text: ``magnitude`` float32 (S, T, d), ``tokens`` (T,) token strings.

    ``peak`` (S, T) is the largest |h| of each position, ``peak_dim`` (S, T) its dim.
    """

    state_names: tuple[str, ...]
    tokens: tuple[str, ...]
    magnitude: np.ndarray

    @property
    def peak(self) -> np.ndarray:
        return self.magnitude.max(axis=2)

    @property
    def peak_dim(self) -> np.ndarray:
        return self.magnitude.argmax(axis=2)

    def top_dims(self, state: int, k: int = 4) -> list[int]:
        """The ``k`` dims with the largest |h| anywhere in the text at ``state``."""
        per_dim = self.magnitude[state].max(axis=0)
        return [int(j) for j in np.argsort(-per_dim, kind="stable")[:k]]


def text_magnitudes(
    loaded: LoadedModel, text: str, max_length: int = MASSIVE_MAX_LENGTH.default
) -> TextMagnitudes:
    """|h| of every hidden state, position and dim for one text (Sun et al., Fig. 1 and 2)."""
    if not text.strip():
        raise InputError("give a non-empty text to inspect")
    hidden, table = encode_text(loaded, text, max_length)  # (S, T, d) float32
    return TextMagnitudes(
        tuple(hidden_state_names(loaded.info.num_layers)),
        tuple(str(t) for t in table.token),
        np.abs(hidden),
    )


# ----------------------------------------------------------------------------- the first position


@dataclass(frozen=True)
class FirstPositionContrast:
    """Anisotropy and the largest |mean| per hidden state (S,), with and without position 0.

    Computed on the token sample of one extraction that includes the first position, on the same
    different-text pairs minus those that touch a position-0 token.
    """

    state_names: tuple[str, ...]
    anisotropy_with: np.ndarray
    anisotropy_without: np.ndarray
    max_abs_mean_with: np.ndarray
    max_abs_mean_without: np.ndarray
    n_first: int
    n_sample: int


def first_position_contrast(result, n_pairs: int | None = None, seed: int | None = None):
    """How much the first position changes the picture (docs/methods.md section 7, "In practice").

    ``result`` must include position 0 (``settings.exclude_first`` off). Anisotropy is Ethayarajh's
    mean cosine of random different-text pairs (``backend.analysis.geometry.isotropy``); the largest |mean| is the
    statistic behind the Outlier page's heatmap. Raises InputError when the sample has no
    position-0 token.
    """
    from backend.analysis.geometry.isotropy import (
        N_PAIRS,
        PAIR_SEED,
        different_text_pairs,
        mean_pair_cosine,
    )

    n_pairs = N_PAIRS if n_pairs is None else n_pairs
    seed = PAIR_SEED if seed is None else seed
    sample = result.sample_tokens
    first = sample.position == 0
    if not first.any():
        raise InputError(
            "the token sample has no first-position token; turn off 'exclude the first position'"
        )
    pairs = different_text_pairs(sample.text_id, n_pairs, seed)
    without = pairs[~first[pairs[:, 0]] & ~first[pairs[:, 1]]]
    vectors = result.sample_vectors  # (S, k, d)
    with_first = np.array([mean_pair_cosine(v, pairs) for v in vectors])
    without_first = np.array([mean_pair_cosine(v, without) for v in vectors])
    # one state at a time, accumulated in float64: no float64 copy of the whole (S, k, d) sample
    # (1.2 GB for 32 states of 3,000 tokens x 1,536 dims)
    mean_with = np.array([np.abs(v.mean(axis=0, dtype=np.float64)).max() for v in vectors])
    mean_without = np.array(
        [np.abs(v[~first].mean(axis=0, dtype=np.float64)).max() for v in vectors]
    )
    return FirstPositionContrast(
        tuple(result.state_names),
        with_first,
        without_first,
        mean_with,
        mean_without,
        int(first.sum()),
        len(first),
    )
