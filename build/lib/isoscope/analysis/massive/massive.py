"""Massive activations in the residual stream: the per-state statistics and their streaming accumulator.

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

:func:`peak_state` is the one rule for "the peak state" (the largest |h|). The carriers are named
in :mod:`isoscope.analysis.massive.carriers`; the pass over a text model's corpus that feeds
:class:`MassiveAccumulator` is :func:`isoscope.analysis.massive.scan.scan_massive` (image and
speech models: :mod:`isoscope.analysis.massive.highnorm`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from isoscope.analysis.massive.carriers import CARRIERS, count_carriers, text_carrier
from isoscope.analysis.massive.loghist import (
    BINS_PER_DECADE,
    LOG_LO,
    N_BINS,
    bin_edge,
    log_histogram,
    median_bin,
    median_from_histogram,
)
from isoscope.engine.device import to_numpy
from isoscope.engine.params import MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO

TOP_K = 3
MAX_CANDIDATES = 2_000_000
MAX_BAND = 50_000_000  # values kept per scan for the exact median (second pass)

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
        for s, where_t, vals in found:
            where = to_numpy(where_t, dtype=None)  # (m, 2): row, dim
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
        carrier_of: Callable[[int, str], str] = text_carrier,
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
                carriers = count_carriers(rows, self.num_states, id_to_token, carrier_of, kinds)
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


def peak_state(stats: MassiveStats) -> int:
    """The peak state of a massive-activation scan: the hidden state holding the largest |h|
    (its top value). The one rule the page, the CLI and the report use."""
    values = np.nan_to_num(np.asarray(stats.top_value[:, 0], dtype=np.float64), nan=-np.inf)
    return int(np.argmax(values))
