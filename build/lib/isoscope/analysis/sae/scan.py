"""One model, one SAE, one corpus: the SAE's encoder on the states the extraction streams.

:func:`run_sae` runs the extraction (first position and special tokens included) with a
:class:`SaeAccumulator` observing each batch (:class:`isoscope.engine.extraction.BatchStates`):
the SAE's state is encoded and decoded on the model's device, in chunks of tokens, and only
reductions leave it. No second forward pass: the outlier dimensions, the mean direction and the
principal components come from the same extraction. What comes back (:class:`SaeReading`,
docs/methods.md section 16):

- **fidelity** by token kind: first position, massive (a token carrying an activation above
  Sun et al.'s threshold, |h| > 100 and > 1000 x the median |h| of the state, first position
  aside), special, ordinary; per kind the fraction of variance unexplained
  FVU = sum ||x - x_hat||^2 / sum ||x - mean(x)||^2 (mean over every token of the corpus) and the
  mean L0 (features on per token); the worst-reconstructed tokens by their relative error
  ||x - x_hat||^2 / ||x||^2;
- **dimensions**: for each outlier (the headline rule, :func:`outlier_dims`) or massive
  dimension d, the features whose decoder rows load on it most, W_dec[f, d] / ||W_dec[f]||, and
  the share of h[t, d] the reconstruction keeps where |h[t, d]| is largest,
  kept = sum x_hat[t, d] x[t, d] / sum x[t, d]^2 over those tokens (1: all of it);
- **features**: each feature's firing frequency; dense ones (firing on more than
  ``dense_share`` of tokens; Sun et al. 2025, arXiv 2506.15679) with the cosine of their decoder
  row with the mean direction and the top principal components of the state; dead ones (never
  fire on the corpus); each feature's top-activating tokens (:meth:`SaeReading.top_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from isoscope.analysis.massive.loghist import N_BINS, log_histogram, median_from_histogram
from isoscope.analysis.outliers import outlier_dims
from isoscope.analysis.sae.encode import decoder_norms, loadings, reconstruct
from isoscope.analysis.sae.load import SaeOnModel
from isoscope.analysis.sae.params import TOKEN_KINDS, SaeSettings
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import (
    BatchStates,
    ExtractionResult,
    ExtractionSettings,
    TokenTable,
    extract,
)
from isoscope.engine.params import MASSIVE_ABS_THRESHOLD, MASSIVE_MEDIAN_RATIO

CHUNK_BYTES_CPU = 64 << 20  # float32 feature activations of one chunk of tokens
CHUNK_BYTES = 256 << 20
MAX_CANDIDATES = 100_000  # vectors kept of tokens that may carry a massive activation
TOP_PCS = 3
STREAMED_KINDS = ("first_position", "special", "ordinary")  # massive is decided at the end


def _merge_top(
    values: torch.Tensor | None, rows: torch.Tensor | None, v: torch.Tensor, r: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest of two (j, m) value tables per column, with their token rows."""
    if values is not None:
        assert rows is not None  # the values and their rows are kept together
        v, r = torch.cat([values, v]), torch.cat([rows, r])
    top = v.topk(min(k, v.shape[0]), dim=0)
    return top.values, r.gather(0, top.indices)


class SaeAccumulator:
    """Observes an extraction's batches (``observe=`` of :func:`isoscope.engine.extraction.extract`)
    and keeps what :class:`SaeReading` needs; every table on the SAE's device until the end."""

    def __init__(self, on: SaeOnModel, settings: SaeSettings) -> None:
        self.on, self.settings = on, settings
        sae = on.sae
        device = sae.device
        m, d = sae.width, sae.d_in
        self.fired = torch.zeros(m, dtype=torch.int64, device=device)
        self.act_sum = torch.zeros(m, dtype=torch.float64, device=device)
        self.hist = torch.zeros(N_BINS, dtype=torch.int64, device=device)
        self.kind_sum = torch.zeros(len(STREAMED_KINDS), d, dtype=torch.float64, device=device)
        self.top_acts: torch.Tensor | None = None  # (k, m) activations
        self.top_rows: torch.Tensor | None = None
        self.dim_abs: torch.Tensor | None = None  # (kd, d) |x|, with x, x_hat and rows
        self.dim_x: torch.Tensor | None = None
        self.dim_xhat: torch.Tensor | None = None
        self.dim_rows: torch.Tensor | None = None
        self.tokens: list[dict[str, np.ndarray]] = []  # per batch: per-token arrays
        self.candidates: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.n_candidates = 0
        per_token = m * 4 * 3  # activations, the mask and topk's scratch
        budget = CHUNK_BYTES_CPU if device.type == "cpu" else CHUNK_BYTES
        self.chunk = max(1, budget // per_token)

    def __call__(self, batch: BatchStates) -> None:
        """Encode one batch's SAE state; the accumulators change only once it all succeeded
        (the extraction redoes a batch that ran out of memory)."""
        sae = self.on.sae
        device = sae.device
        x_all = batch.state(self.on.state).to(device, torch.float32)
        rows_all = torch.from_numpy(batch.rows.astype(np.int64)).to(device)
        first = batch.tokens.position == 0
        kind3 = np.where(first, 0, np.where(batch.tokens.is_special, 1, 2))
        kinds_t = torch.from_numpy(kind3).to(device)
        fired = torch.zeros_like(self.fired)
        act_sum = torch.zeros_like(self.act_sum)
        top_acts, top_rows = self.top_acts, self.top_rows
        dim: tuple[torch.Tensor | None, ...] = (
            self.dim_abs,
            self.dim_x,
            self.dim_xhat,
            self.dim_rows,
        )
        per_token: dict[str, list[torch.Tensor]] = {k: [] for k in ("err2", "norm2", "l0")}
        k_top, k_dim = self.settings.top_tokens, self.settings.dim_tokens
        for start in range(0, x_all.shape[0], self.chunk):
            x = x_all[start : start + self.chunk]
            rows = rows_all[start : start + self.chunk]
            acts, x_hat = reconstruct(sae, x)
            on = acts > 0
            per_token["err2"].append((x - x_hat).double().pow(2).sum(-1))
            per_token["norm2"].append(x.double().pow(2).sum(-1))
            per_token["l0"].append(on.sum(-1))
            fired += on.sum(0)
            act_sum += acts.sum(0, dtype=torch.float64)
            v, i = acts.topk(min(k_top, acts.shape[0]), dim=0)
            top_acts, top_rows = _merge_top(top_acts, top_rows, v, rows[i], k_top)
            magnitude = x.abs()
            v, i = magnitude.topk(min(k_dim, x.shape[0]), dim=0)
            merged = [v, x.gather(0, i), x_hat.gather(0, i), rows[i]]
            if dim[0] is not None:  # the four tables are set together
                kept = cast(tuple[torch.Tensor, ...], dim)
                merged = [torch.cat([a, b]) for a, b in zip(kept, merged, strict=True)]
            keep = merged[0].topk(min(k_dim, merged[0].shape[0]), dim=0).indices
            dim = tuple(t.gather(0, keep) for t in merged)
        magnitude = x_all.abs()
        max_abs, max_dim = magnitude.max(dim=-1)
        hist = log_histogram(magnitude.reshape(-1))
        kind_sum = torch.zeros_like(self.kind_sum).index_add_(0, kinds_t, x_all.double())
        candidate = (max_abs > float(MASSIVE_ABS_THRESHOLD)) & (kinds_t != 0)
        found = to_numpy(candidate.nonzero().flatten(), dtype=None)
        found = found[: max(0, MAX_CANDIDATES - self.n_candidates)]
        arrays = {
            "rows": batch.rows.astype(np.int64),
            "kind3": kind3,
            "err2": to_numpy(torch.cat(per_token["err2"]), dtype=None),
            "norm2": to_numpy(torch.cat(per_token["norm2"]), dtype=None),
            "l0": to_numpy(torch.cat(per_token["l0"]), dtype=None),
            "max_abs": to_numpy(max_abs),
            "max_dim": to_numpy(max_dim, dtype=None),
        }
        vectors = to_numpy(x_all[torch.from_numpy(found).to(device)]) if len(found) else None
        # Everything computed: commit.
        self.fired += fired
        self.act_sum += act_sum
        self.hist += hist
        self.kind_sum += kind_sum
        self.top_acts, self.top_rows = top_acts, top_rows
        self.dim_abs, self.dim_x, self.dim_xhat, self.dim_rows = dim
        self.tokens.append(arrays)
        if vectors is not None:
            self.candidates.append((arrays["rows"][found], kind3[found], vectors))
            self.n_candidates += len(found)

    def finish(self, result: ExtractionResult) -> SaeReading:
        """The reading, with the extraction's token table, outlier dims, mean and sample."""
        if not self.tokens:
            raise InputError("the texts produced no tokens; give real text")
        return _finish(self, result)


@dataclass(frozen=True)
class SaeReading:
    """What :func:`run_sae` found (module doc). Per-token arrays follow the extraction's token
    table (``tokens``); ``features`` lists those that fired, most frequent first."""

    state: int
    state_name: str
    sae: dict[str, Any]
    n_tokens: int
    median_abs: float
    massive_threshold: float
    fidelity: dict[str, dict[str, float | None]]  # None: a kind without tokens or spread
    worst_tokens: list[dict[str, Any]]
    dimensions: list[dict[str, Any]]
    frequency: np.ndarray  # (m,) share of tokens each feature fires on
    mean_activation: np.ndarray  # (m,) mean activation where it fires (0 when dead)
    dense: list[dict[str, Any]]
    dead: np.ndarray  # feature ids that never fired
    top_values: np.ndarray  # (k, m) each feature's largest activations, descending
    top_rows: np.ndarray  # (k, m) their rows in ``tokens``
    tokens: TokenTable  # the extraction's token table (every token)
    kind: np.ndarray  # (n,) token kind per token (TOKEN_KINDS)
    relative_error: np.ndarray  # (n,) ||x - x_hat||^2 / ||x||^2
    l0: np.ndarray  # (n,)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def top_tokens(self, feature: int) -> list[dict[str, Any]]:
        """Feature ``feature``'s top-activating tokens (largest activation first, with a few
        tokens of context); empty for a feature that never fired."""
        values, rows = self.top_values[:, feature], self.top_rows[:, feature]
        return [
            {**_token(self.tokens, int(rows[j])), "activation": float(values[j])}
            for j in range(len(values))
            if values[j] > 0
        ]

    @property
    def fired(self) -> np.ndarray:
        """Feature ids that fired at least once, most frequent first."""
        ids = np.flatnonzero(self.frequency > 0)
        return ids[np.argsort(-self.frequency[ids], kind="stable")]

    def features(self) -> list[dict[str, Any]]:
        return [
            {
                "feature": int(f),
                "frequency": float(self.frequency[f]),
                "mean_activation": float(self.mean_activation[f]),
            }
            for f in self.fired
        ]

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON (docs/cli.md, ``isoscope sae``)."""
        return {
            "state": self.state_name,
            "state_index": self.state,
            "sae": self.sae,
            "tokens": self.n_tokens,
            "median_abs": self.median_abs,
            "massive_threshold": self.massive_threshold,
            "fidelity": self.fidelity,
            "worst_tokens": self.worst_tokens,
            "dimensions": self.dimensions,
            "features": self.features(),
            "dense": self.dense,
            "dead": {"count": int(len(self.dead)), "features": [int(f) for f in self.dead]},
            "notes": list(self.notes),
        }


def _finish(acc: SaeAccumulator, result: ExtractionResult) -> SaeReading:
    sae, state, settings = acc.on.sae, acc.on.state, acc.settings
    cols = {k: np.concatenate([t[k] for t in acc.tokens]) for k in acc.tokens[0]}
    order = np.argsort(cols["rows"], kind="stable")
    cols = {k: v[order] for k, v in cols.items()}
    n = len(order)
    median = float(median_from_histogram(to_numpy(acc.hist, dtype=None))[0])
    threshold = max(float(MASSIVE_ABS_THRESHOLD), float(MASSIVE_MEDIAN_RATIO) * median)
    massive = (cols["max_abs"] > threshold) & (cols["kind3"] != 0)
    kind = np.array(STREAMED_KINDS, dtype=object)[cols["kind3"]]
    kind[massive] = "massive"
    sums = to_numpy(acc.kind_sum, dtype=None)
    mean = sums.sum(axis=0) / n
    kind_sum = {name: sums[i].copy() for i, name in enumerate(STREAMED_KINDS)}
    kind_sum["massive"] = np.zeros_like(mean)
    notes = list(acc.on.notes)
    if acc.candidates:
        rows = np.concatenate([c[0] for c in acc.candidates])
        kind3 = np.concatenate([c[1] for c in acc.candidates])
        vectors = np.concatenate([c[2] for c in acc.candidates])
        is_massive = massive[np.searchsorted(cols["rows"], rows)]
        for j in np.flatnonzero(is_massive):
            kind_sum["massive"] += vectors[j]
            kind_sum[STREAMED_KINDS[kind3[j]]] -= vectors[j]
        if acc.n_candidates >= MAX_CANDIDATES:
            notes.append(
                f"more than {MAX_CANDIDATES:,} tokens above |h| = {MASSIVE_ABS_THRESHOLD:g}: "
                "the massive kind's FVU counts the first of them only"
            )
    fidelity: dict[str, dict[str, float | None]] = {}
    for name in (*TOKEN_KINDS, "all"):
        pick = np.ones(n, bool) if name == "all" else kind == name
        total = mean * n if name == "all" else kind_sum[name]
        count = int(pick.sum())
        err = float(cols["err2"][pick].sum())
        spread = float(cols["norm2"][pick].sum() - 2 * mean @ total + count * mean @ mean)
        fidelity[name] = {
            "fvu": err / spread if count and spread > 0 else None,
            "l0": float(cols["l0"][pick].mean()) if count else None,
            "tokens": count,
        }
    relative = cols["err2"] / np.maximum(cols["norm2"], 1e-30)
    tokens = result.tokens
    worst = np.argsort(-relative, kind="stable")[: settings.worst_tokens]
    worst_tokens = [
        {
            **_token(tokens, int(t)),
            "kind": str(kind[t]),
            "relative_error": float(relative[t]),
            "norm": float(np.sqrt(cols["norm2"][t])),
            "l0": int(cols["l0"][t]),
        }
        for t in worst
    ]
    fired = to_numpy(acc.fired, dtype=None)
    frequency = fired / n
    mean_activation = np.where(
        fired > 0, to_numpy(acc.act_sum, dtype=None) / np.maximum(fired, 1), 0.0
    )
    massive_dims = _massive_dims(cols["max_dim"][massive])
    dims = _dimensions(acc, result, massive_dims, frequency)
    dense = _dense(sae, result, state, mean, frequency, settings.dense_share)
    assert acc.top_acts is not None and acc.top_rows is not None  # every chunk merges its top
    return SaeReading(
        state=state,
        state_name=acc.on.state_name,
        sae=sae.describe(),
        n_tokens=n,
        median_abs=median,
        massive_threshold=threshold,
        fidelity=fidelity,
        worst_tokens=worst_tokens,
        dimensions=dims,
        frequency=frequency,
        mean_activation=mean_activation,
        dense=dense,
        dead=np.flatnonzero(fired == 0),
        top_values=to_numpy(acc.top_acts, dtype=None),
        top_rows=to_numpy(acc.top_rows, dtype=None),
        tokens=tokens,
        kind=kind.astype(str),
        relative_error=relative,
        l0=cols["l0"],
        notes=tuple(notes),
    )


def _token(tokens, row: int) -> dict[str, Any]:
    """A token's text, position, string and a few tokens of context."""
    text = int(tokens.text_id[row])
    position = int(tokens.position[row])
    lo = max(0, row - 6)
    hi = min(len(tokens), row + 4)
    same = [j for j in range(lo, hi) if tokens.text_id[j] == text]
    context = " ".join(f"[{tokens.token[j]}]" if j == row else str(tokens.token[j]) for j in same)
    return {
        "row": row,
        "text": text,
        "position": position,
        "token": str(tokens.token[row]),
        "context": context,
    }


def _massive_dims(dims: np.ndarray) -> list[int]:
    """The dims that carry the massive tokens' largest |h|, most frequent first."""
    if not len(dims):
        return []
    values, counts = np.unique(dims, return_counts=True)
    return [int(values[i]) for i in np.argsort(-counts, kind="stable")]


def _dimensions(
    acc: SaeAccumulator, result: ExtractionResult, massive_dims: list[int], frequency: np.ndarray
) -> list[dict[str, Any]]:
    """Per outlier or massive dimension: its features by |loading| and the share of h[t, d] the
    reconstruction keeps at its largest |h[t, d]|."""
    sae, state, settings = acc.on.sae, acc.on.state, acc.settings
    outliers = outlier_dims(result, state)
    dims = list(dict.fromkeys([*outliers, *massive_dims]))
    norms = decoder_norms(sae)
    assert acc.dim_x is not None and acc.dim_xhat is not None  # every chunk merges its top
    x = to_numpy(acc.dim_x)
    x_hat = to_numpy(acc.dim_xhat)
    out = []
    for d in dims:
        column = loadings(sae, d, norms)
        top = to_numpy(
            column.abs().topk(min(settings.features_per_dim, sae.width)).indices, dtype=None
        )
        load = to_numpy(column)
        energy = float(x[:, d] @ x[:, d])
        out.append(
            {
                "dim": int(d),
                "kinds": [
                    k
                    for k, on in (("outlier", d in outliers), ("massive", d in massive_dims))
                    if on
                ],
                "features": [
                    {
                        "feature": int(f),
                        "loading": float(load[f]),
                        "frequency": float(frequency[f]),
                    }
                    for f in top
                ],
                "kept": float(x_hat[:, d] @ x[:, d]) / energy if energy > 0 else None,
                "mean_abs_large": float(np.abs(x[:, d]).mean()),
                "mean_abs_reconstructed": float(np.abs(x_hat[:, d]).mean()),
                "large_tokens": int(x.shape[0]),
            }
        )
    return out


def principal_directions(result: ExtractionResult, state: int, top: int = TOP_PCS) -> np.ndarray:
    """(top, d) the leading principal directions of the state's token sample (centred)."""
    sample = np.asarray(result.sample_vectors[state], dtype=np.float64)
    if sample.shape[0] < 2:
        return np.zeros((0, sample.shape[1]))
    centred = sample - sample.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return vt[:top]


def _dense(sae, result, state, mean, frequency, dense_share) -> list[dict[str, Any]]:
    """Dense features (frequency > ``dense_share``) with their decoder row's cosine with the
    mean direction and |cosine| with each top principal direction."""
    ids = np.flatnonzero(frequency > dense_share)
    ids = ids[np.argsort(-frequency[ids], kind="stable")]
    if not len(ids):
        return []
    rows = to_numpy(sae.w_dec[torch.from_numpy(ids).to(sae.device)])
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-30)
    mu = mean / max(np.linalg.norm(mean), 1e-30)
    pcs = principal_directions(result, state)
    return [
        {
            "feature": int(f),
            "frequency": float(frequency[f]),
            "cos_mean": float(rows[i] @ mu),
            "cos_pcs": [float(abs(rows[i] @ pc)) for pc in pcs],
        }
        for i, f in enumerate(ids)
    ]


def run_sae(
    loaded,
    corpus,
    on: SaeOnModel,
    settings: SaeSettings | None = None,
    progress: Progress | None = None,
) -> tuple[SaeReading, ExtractionResult]:
    """The SAE ``on`` over ``corpus`` in the extraction's one pass (module doc). Returns the
    reading and the extraction (every token, first position and special tokens included)."""
    settings = settings or SaeSettings()
    if getattr(corpus, "kind", "text") != "text":
        raise InputError("the SAE analysis reads text models on texts; give a text corpus")
    extraction = ExtractionSettings(max_length=settings.max_length, batch_size=settings.batch_size)
    acc = SaeAccumulator(on, settings)
    with torch.inference_mode():
        result = extract(loaded, corpus, extraction, progress, observe=acc)
    return acc.finish(result), result
