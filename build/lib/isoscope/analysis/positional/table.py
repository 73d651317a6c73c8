"""Where absolute position lives: the position-embedding table and a per-layer position probe.

- Position embeddings (Luo, Kulmizev & Mao 2021, arXiv 2011.04393): cosine matrix and PCA of the
  learned table, and each position vector's extreme dimensions (share of positions whose argmin /
  argmax sits in dim j) next to the hidden-state outliers. Kovaleva et al. 2021 (BERT Busters,
  arXiv 2105.06990) blame the embedding LayerNorm instead, so its gamma/beta come along.
- Position probe (Luo et al. section 4): a bias-free linear softmax classifier from a token vector
  to its absolute position, trained per hidden state on the extraction's token sample, with a
  train / held-out split by *text* (no text contributes tokens to both sides). Neuron
  contribution c(i) = mean over held-out tokens of |w_{y,i} * v_i| (weight of the true position's
  class times activation).

Probe details (documented choices):
- Raw vectors, no per-dimension standardisation, so that w_i * v_i is a contribution of neuron i
  in the model's own coordinates. Each hidden state is divided by one global scalar (its RMS over
  the training tokens) to make the L2 penalty comparable across layers; a global scale leaves
  c(i) and the predictions unchanged in relative terms (c is reported after undoing it).
- Positions >= ``max_position`` are dropped (not merged), so every class is one real position.
- Special tokens ([CLS] is always at position 0, [SEP] marks the end) are left out by default:
  their identity, not a position code, would give their position away.
- Multinomial logistic loss with a small L2 penalty, full-batch L-BFGS in float32 (capped
  iterations; scikit-learn's solver is far slower per state), statistics in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import torch

from isoscope.analysis.positional.params import MAX_POSITION, PROBE_ITER, TEST_FRACTION
from isoscope.engine.arch import architecture
from isoscope.engine.arch import position_offset as arch_position_offset
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel, position_table
from isoscope.engine.params import SEED

# ----------------------------------------------------------------------------- position table


@dataclass(frozen=True)
class PositionTableReport:
    """Geometry of the first ``num_positions`` rows of a learned position table.

    ``cosine``: float64 (N, N); ``pca_coords``: (N, 3); ``pca_explained``: (3,) variance ratios;
    ``argmax_share`` / ``argmin_share``: (d,) share of position vectors whose max / min is dim j;
    ``norms``: (N,) L2 norm of each position vector.
    """

    num_positions: int
    table_size: int
    cosine: np.ndarray
    pca_coords: np.ndarray
    pca_explained: np.ndarray
    norms: np.ndarray
    argmax_share: np.ndarray
    argmin_share: np.ndarray

    def top_extreme_dims(self, top: int = 5) -> list[dict[str, Any]]:
        """Dims that most often hold a position vector's max or min, by the larger share."""
        share = np.maximum(self.argmax_share, self.argmin_share)
        dims = np.argsort(-share, kind="stable")[:top]
        return [
            {
                "dim": int(j),
                "argmax_share": float(self.argmax_share[j]),
                "argmin_share": float(self.argmin_share[j]),
            }
            for j in dims
        ]


def position_table_weights(loaded: LoadedModel) -> np.ndarray:
    """The absolute position table as float64 (P, d); UnsupportedModelError when there is none."""
    table = position_table(loaded)
    if table is None:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} has no learned absolute position table "
            f"(position embeddings: {loaded.info.position_embedding}); the position-embedding view "
            "needs a BERT- or GPT-2-style model (try the default model or random:bert)"
        )
    return to_numpy(table.weight)


def analyse_position_table(
    weights: np.ndarray, num_positions: int = 128, offset: int = 0
) -> PositionTableReport:
    """Cosine matrix, PCA and extreme-dimension shares of rows ``offset .. offset+N-1``.

    ``offset`` skips rows the model never uses as positions (RoBERTa starts at padding_idx + 1).
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape[0] < 2:
        raise InputError("the position table needs at least 2 rows")
    n = int(min(max(num_positions, 2), weights.shape[0] - offset))
    rows = weights[offset : offset + n]
    norms = np.linalg.norm(rows, axis=1)
    unit = rows / np.maximum(norms, 1e-12)[:, None]
    cosine = unit @ unit.T
    centred = rows - rows.mean(axis=0)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(3, vt.shape[0])
    coords = np.zeros((n, 3))
    coords[:, :k] = centred @ vt[:k].T
    total = float((sing**2).sum())
    explained = np.zeros(3)
    if total > 0:
        explained[:k] = sing[:k] ** 2 / total
    d = rows.shape[1]
    return PositionTableReport(
        num_positions=n,
        table_size=int(weights.shape[0]),
        cosine=cosine,
        pca_coords=coords,
        pca_explained=explained,
        norms=norms,
        argmax_share=np.bincount(rows.argmax(axis=1), minlength=d) / n,
        argmin_share=np.bincount(rows.argmin(axis=1), minlength=d) / n,
    )


def position_offset(loaded: LoadedModel) -> int:
    """First table row used as a position (RoBERTa-style tables start at padding_idx + 1; OPT at 2),
    read from the table module (:func:`isoscope.engine.arch.position_offset`)."""
    return arch_position_offset(loaded)


def embedding_layernorm(loaded: LoadedModel) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(name, gamma, beta) of the first norm applied to word + position embeddings, or None.

    From the architecture map: post-LN encoders have an embedding LayerNorm (canonical ``emb.ln``);
    pre-LN models (GPT-2) first normalise word + position in layer 1's pre-attention norm
    (``L1.pre_attn_ln``). RMSNorm has no beta (zeros); Gemma's gamma is weight + 1.
    """
    try:
        arch = architecture(loaded)
    except UnsupportedModelError:
        return None
    ln, name = arch.embedding_norm, "emb.ln"
    if ln is None and arch.pre_ln:
        ln, name = dict(arch.layers[0].norms).get("pre_attn"), "L1.pre_attn_ln (pre-LN)"
    if ln is None or getattr(ln, "weight", None) is None:
        return None
    gamma = to_numpy(cast(torch.Tensor, ln.weight)) + arch.gamma_offset
    beta = (
        to_numpy(cast(torch.Tensor, ln.bias))
        if getattr(ln, "bias", None) is not None
        else np.zeros_like(gamma)
    )
    return name, gamma, beta


def extreme_dims_vs_outliers(
    report: PositionTableReport, outliers_by_state: dict[str, list[int]], top: int = 8
) -> list[dict[str, Any]]:
    """Rows for the table's top extreme dims plus every hidden-state outlier dim: shares in the
    table and the hidden states where the dim is an outlier (Luo's comparison)."""
    dims = [row["dim"] for row in report.top_extreme_dims(top)]
    for found in outliers_by_state.values():
        dims.extend(j for j in found if j not in dims)
    rows = []
    for j in dims:
        states = [name for name, found in outliers_by_state.items() if j in found]
        rows.append(
            {
                "dim": int(j),
                "table argmax share": float(report.argmax_share[j]),
                "table argmin share": float(report.argmin_share[j]),
                "hidden-state outlier in": ", ".join(states) or "—",
            }
        )
    return rows


# ----------------------------------------------------------------------------- position probe


@dataclass(frozen=True)
class ProbeSettings:
    """Parameters of the position probe (part of the memo key)."""

    max_position: int = MAX_POSITION.default
    test_fraction: float = TEST_FRACTION.default
    seed: int = SEED.default
    l2: float = 1e-3
    max_iter: int = PROBE_ITER.default
    max_train_tokens: int = 4000
    exclude_special: bool = True

    def __post_init__(self) -> None:
        MAX_POSITION.check(self.max_position, "max position")
        TEST_FRACTION.check(self.test_fraction, "held-out fraction")
        if self.l2 < 0:
            raise InputError("the L2 penalty must be >= 0")
        PROBE_ITER.check(self.max_iter, "max iterations")


@dataclass(frozen=True)
class ProbeResult:
    """Held-out accuracy and neuron contributions per hidden state.

    ``accuracy``: (S,); ``train_accuracy``: (S,); ``contributions``: float64 (S, d), c(i) per state;
    ``chance``: accuracy of always predicting the most frequent training position on the held-out
    tokens; ``classes``: the positions used (0 .. max_position-1 that occur in training).
    """

    state_names: list[str]
    accuracy: np.ndarray
    train_accuracy: np.ndarray
    contributions: np.ndarray
    chance: float
    classes: np.ndarray
    n_train: int
    n_test: int
    n_train_texts: int
    n_test_texts: int
    settings: ProbeSettings
    confusion_last: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "state_names": self.state_names,
            "accuracy": self.accuracy.tolist(),
            "train_accuracy": self.train_accuracy.tolist(),
            "chance": self.chance,
            "num_classes": len(self.classes),
            "n_train_tokens": self.n_train,
            "n_test_tokens": self.n_test,
            "n_train_texts": self.n_train_texts,
            "n_test_texts": self.n_test_texts,
            "settings": self.settings.__dict__,
        }


def split_by_text(text_id: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean held-out mask: a seeded random ``test_fraction`` of the *texts* (at least one,
    and at least one left for training)."""
    texts = np.unique(text_id)
    if len(texts) < 2:
        raise InputError(
            "the position probe needs tokens from at least 2 texts (it splits by text)"
        )
    rng = np.random.default_rng(seed)
    n_test = int(np.clip(round(test_fraction * len(texts)), 1, len(texts) - 1))
    held_out = rng.choice(texts, size=n_test, replace=False)
    return np.isin(text_id, held_out)


def fit_softmax_probe(
    x: np.ndarray, y: np.ndarray, num_classes: int, l2: float = 1e-3, max_iter: int = 30
) -> np.ndarray:
    """Bias-free multinomial logistic regression; returns W float64 (d, C), logits = x @ W.

    Full-batch L-BFGS (strong Wolfe line search) on mean cross-entropy + l2/2 ||W||^2.
    """
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))
    weights = torch.zeros(xt.shape[1], num_classes, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.LBFGS(
        [weights],
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-6,
        tolerance_change=1e-9,
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = (
            torch.nn.functional.cross_entropy(xt @ weights, yt)
            + 0.5 * l2 * (weights * weights).sum()
        )
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return to_numpy(weights)


def probe_positions(
    vectors: np.ndarray,
    position: np.ndarray,
    text_id: np.ndarray,
    is_special: np.ndarray | None = None,
    settings: ProbeSettings | None = None,
    state_names: list[str] | None = None,
    progress: Progress | None = None,
) -> ProbeResult:
    """Position probe on token vectors ``vectors`` float (S, n, d) with metadata (n,) arrays."""
    settings = settings or ProbeSettings()
    vectors = np.asarray(vectors)
    if vectors.ndim == 2:
        vectors = vectors[None]
    num_states, n, d = vectors.shape
    position = np.asarray(position)
    text_id = np.asarray(text_id)
    keep = position < settings.max_position
    if is_special is not None and settings.exclude_special:
        keep &= ~np.asarray(is_special, dtype=bool)
    if keep.sum() < 10:
        raise InputError(
            f"only {int(keep.sum())} tokens below position {settings.max_position}; the probe needs more "
            "tokens (use a larger corpus or token sample)"
        )
    idx = np.flatnonzero(keep)
    held_out = split_by_text(text_id[idx], settings.test_fraction, settings.seed)
    train, test = idx[~held_out], idx[held_out]
    rng = np.random.default_rng(settings.seed)
    if len(train) > settings.max_train_tokens:
        train = np.sort(rng.choice(train, size=settings.max_train_tokens, replace=False))
    classes = np.unique(position[train])
    if len(classes) < 2:
        raise InputError(
            f"the training tokens cover only {len(classes)} position(s) below {settings.max_position}; "
            "raise the max position (or include special tokens) so the probe has positions to tell apart"
        )
    lookup = np.full(int(position.max()) + 1, -1, dtype=np.int64)
    lookup[classes] = np.arange(len(classes))
    y_train = lookup[position[train]]
    y_test = lookup[position[test]]  # -1: a position never seen in training (always counted wrong)
    majority = np.bincount(y_train).argmax()
    chance = float((y_test == majority).mean()) if len(y_test) else float("nan")

    accuracy = np.zeros(num_states)
    train_accuracy = np.zeros(num_states)
    contributions = np.zeros((num_states, d))
    for s in range(num_states):
        x_train = vectors[s, train].astype(np.float64)
        x_test = vectors[s, test].astype(np.float64)
        scale = float(np.sqrt((x_train**2).mean())) or 1.0
        w = fit_softmax_probe(
            x_train / scale, y_train, len(classes), settings.l2, settings.max_iter
        )
        w_raw = w / scale  # logits = x_raw @ w_raw
        train_accuracy[s] = float(((x_train @ w_raw).argmax(1) == y_train).mean())
        if len(test):
            accuracy[s] = float(((x_test @ w_raw).argmax(1) == y_test).mean())
            seen = y_test >= 0
            # c(i) = mean_t |w_{y_t, i} * v_{t, i}| over held-out tokens of seen positions
            contributions[s] = np.abs(w_raw[:, y_test[seen]].T * x_test[seen]).mean(axis=0)
        if progress is not None:
            progress(s + 1, num_states)
    return ProbeResult(
        state_names=state_names or [str(s) for s in range(num_states)],
        accuracy=accuracy,
        train_accuracy=train_accuracy,
        contributions=contributions,
        chance=chance,
        classes=classes,
        n_train=len(train),
        n_test=len(test),
        n_train_texts=len(np.unique(text_id[train])),
        n_test_texts=len(np.unique(text_id[test])),
        settings=settings,
    )


def probe_result(
    result: ExtractionResult,
    settings: ProbeSettings | None = None,
    progress: Progress | None = None,
) -> ProbeResult:
    """The position probe on an ExtractionResult's token sample (every hidden state, emb first)."""
    tokens = result.sample_tokens
    return probe_positions(
        result.sample_vectors,
        tokens.position,
        tokens.text_id,
        tokens.is_special,
        settings=settings,
        state_names=result.state_names,
        progress=progress,
    )


def contribution_table(probe: ProbeResult, state: int, outliers: list[int], top: int = 20):
    """Top neurons by contribution at one state, with their share of the total and outlier flag."""
    import pandas as pd  # lazy: a slow import that only the table views need

    c = probe.contributions[state]
    total = float(c.sum()) or 1.0
    order = np.argsort(-c, kind="stable")[:top]
    return pd.DataFrame(
        {
            "dim": order.astype(int),
            "contribution": c[order],
            "share of total": c[order] / total,
            "outlier dim": [int(j) in set(outliers) for j in order],
        }
    )
