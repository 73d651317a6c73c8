"""Sentence similarity (STS) and word senses (WiC-style) per hidden state, raw vs post-processed.

Luo, Kulmizev & Mao 2021, *Positional Artefacts Propagate Through Masked Language Model
Embeddings* (arXiv 2011.04393), Table 2 and the word-sense experiment:

- **STS**: mean-pool the token vectors of each sentence at every hidden state (all non-padding
  tokens, special tokens included, like sentence-transformers), cosine per pair, Spearman's rank
  correlation x 100 against the gold scores (Cer et al. 2017, STS Benchmark). Raw vs clipped
  (outlier dimensions set to 0), and vs any :mod:`isoscope.analysis.projections.postprocess` transformer fitted on the
  pooled vectors of that hidden state.
- **Word senses** (after WiC, Pilehvar & Camacho-Collados 2019, arXiv 1808.09121): for rows
  (word, context1, context2, same_sense) the vectors of the word in both contexts (word pieces
  averaged), cosine per hidden state, and the accuracy of "same sense iff cosine > t" at the best
  threshold t. That best threshold is chosen on the same rows, so the accuracy is optimistic; the
  leave-one-out accuracy (threshold chosen without the row it predicts) is reported beside it.

The inputs (CSV files of sentence pairs and word-sense rows) are read by
:mod:`isoscope.engine.inputs.pairs`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy.stats import spearmanr

from isoscope.analysis.anisotropy import cosine_rows
from isoscope.analysis.outliers import auto_clip_dims
from isoscope.analysis.projections.postprocess import ClipDims, make_postprocessor, parse_dims
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction import ExtractionResult, forward_batches, mean_pooled, tokenize
from isoscope.engine.inputs.pairs import SentencePairs, WordSenseRows
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names
from isoscope.engine.params import BATCH_SIZE, MAX_LENGTH

# ----------------------------------------------------------------------------- scoring


def spearman100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman's rank correlation x 100 (scipy.stats.spearmanr; ties get average ranks).
    NaN when either side is constant."""
    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if len(predicted) < 3 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(100.0 * spearmanr(predicted, gold).statistic)


def top_mean_dims(vectors: np.ndarray, k: int = 2) -> list[int]:
    """The ``k`` dimensions with the largest |mean| over the rows of ``vectors`` (n, d) (ties: lower index)."""
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    return [int(j) for j in np.argsort(-np.abs(mean), kind="stable")[:k]]


def pool_pairs(
    loaded: LoadedModel,
    pairs: SentencePairs,
    max_length: int = MAX_LENGTH.default,
    batch_size: int = BATCH_SIZE.default,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean-pooled vectors of both sides, float64 (S, n, d) each; every distinct sentence is run once."""

    unique = sorted(set(pairs.sentence1) | set(pairs.sentence2))
    where = {s: i for i, s in enumerate(unique)}
    pooled = mean_pooled(
        loaded, unique, max_length=max_length, batch_size=batch_size, progress=progress
    )
    first = pooled[:, [where[s] for s in pairs.sentence1]]
    second = pooled[:, [where[s] for s in pairs.sentence2]]
    return first, second


CLIP_MODES = ("auto", "largest-mean", "none")


def parse_clip(value: str, hidden_size: int | None = None) -> str | list[int]:
    """``--clip`` values: "auto", "largest-mean", "none", or dims "D1,D2,..." (list of ints)."""
    text = str(value).strip().lower()
    if text in CLIP_MODES:
        return text

    dims = parse_dims(text, hidden_size)
    if not dims:
        raise InputError(
            "--clip needs 'auto', 'largest-mean', 'none' or dimension indices such as 223,338"
        )
    return dims


def clip_dims_by_state(
    clip: str | Sequence[int] | Sequence[Sequence[int]],
    pooled1: np.ndarray,
    pooled2: np.ndarray,
    k: int = 2,
    *,
    result: ExtractionResult | None = None,
) -> list[list[int]]:
    """The dims to clip at every hidden state: "auto" = each state's headline outlier dims in the
    extraction ``result`` (:func:`isoscope.analysis.outliers.auto_clip_dims`, the meaning of
    "auto" everywhere); "largest-mean" = the ``k`` dims with the largest |mean| over the evaluated
    texts (both sides' pooled vectors) at that state; "none" = []; a list of ints = the same dims
    everywhere; a list of lists = per state."""
    num_states = pooled1.shape[0]
    if isinstance(clip, str):
        if clip == "auto":
            if result is None or result.num_states != num_states:
                raise InputError(
                    "clip 'auto' zeroes each hidden state's outlier dims, detected on an "
                    "extraction of the same model: pass result="
                )
            return auto_clip_dims(result)
        if clip == "largest-mean":
            return [
                top_mean_dims(np.concatenate([pooled1[s], pooled2[s]]), k)
                for s in range(num_states)
            ]
        if clip == "none":
            return [[] for _ in range(num_states)]
        raise InputError(
            f"unknown clip mode {clip!r}; use 'auto', 'largest-mean', 'none' or a list of dims"
        )
    given = list(clip)
    if given and isinstance(given[0], list | tuple | np.ndarray):
        per_state = cast(list[Sequence[int]], given)  # one list of dims per hidden state
        if len(per_state) != num_states:
            raise InputError(
                f"got clip dims for {len(per_state)} hidden states, the model has {num_states}"
            )
        return [sorted({int(j) for j in dims}) for dims in per_state]
    return [sorted({int(j) for j in cast(list[int], given)}) for _ in range(num_states)]


def _clip(x: np.ndarray, dims: Sequence[int]) -> np.ndarray:

    return ClipDims(tuple(dims)).fit_transform(x)


def sts_by_state(
    pooled1: np.ndarray,
    pooled2: np.ndarray,
    gold: np.ndarray,
    clip_dims: Sequence[Sequence[int]],
    postprocess: str | None = None,
    params: dict | None = None,
    state_names: Sequence[str] | None = None,
) -> list[dict]:
    """Spearman x 100 per hidden state: raw, clipped (``clip_dims[s]`` zeroed), and optionally after
    ``postprocess`` (a :data:`~isoscope.analysis.projections.postprocess.POSTPROCESSORS` name)
    fitted on both sides' pooled
    vectors of that state. One dict per state: index, name, raw, clipped, clipped_dims[, processed]."""

    num_states = pooled1.shape[0]
    names = list(state_names) if state_names is not None else hidden_state_names(num_states - 1)
    rows = []
    for s in range(num_states):
        a, b = pooled1[s], pooled2[s]
        dims = [int(j) for j in clip_dims[s]]
        row = {
            "index": s,
            "name": names[s],
            "raw": spearman100(cosine_rows(a, b), gold),
            "clipped": spearman100(cosine_rows(_clip(a, dims), _clip(b, dims)), gold),
            "clipped_dims": dims,
        }
        if postprocess is not None:
            fitted = make_postprocessor(postprocess, **(params or {})).fit(np.concatenate([a, b]))
            row["processed"] = spearman100(
                cosine_rows(fitted.transform(a), fitted.transform(b)), gold
            )
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- word senses


_WORD_CHARS = r"[^\W_]"


def find_word_span(context: str, word: str) -> tuple[int, int] | None:
    """Character span of ``word`` in ``context`` (case-insensitive): the first whole-word match,
    else the first word that starts with it (an inflection: 'bank' finds 'banks'); None if absent."""
    target = re.escape(word.strip())
    if not target:
        return None
    for pattern in (
        rf"(?<!{_WORD_CHARS}){target}(?!{_WORD_CHARS})",
        rf"(?<!{_WORD_CHARS}){target}{_WORD_CHARS}*",
    ):
        found = re.search(pattern, context, flags=re.IGNORECASE)
        if found:
            return found.start(), found.end()
    return None


def token_span(
    offsets: Sequence[tuple[int, int]], special: Sequence[bool] | np.ndarray, span: tuple[int, int]
) -> list[int]:
    """Token indices whose character offsets overlap ``span`` (special tokens never)."""
    start, end = span
    return [
        i
        for i, ((s, e), sp) in enumerate(zip(offsets, special, strict=True))
        if not sp and e > s and s < end and e > start
    ]


@dataclass(frozen=True)
class WordSenseVectors:
    """The word's vectors in both contexts, float64 (S, m, d) each, for the m usable rows
    (``rows`` indexes the input rows); ``problems`` says why the other rows were skipped."""

    first: np.ndarray
    second: np.ndarray
    same_sense: np.ndarray
    rows: np.ndarray
    problems: tuple[str, ...]


def word_vectors(
    loaded: LoadedModel,
    data: WordSenseRows,
    max_length: int = MAX_LENGTH.default,
    batch_size: int = BATCH_SIZE.default,
    progress: Progress | None = None,
) -> WordSenseVectors:
    """Average of the word's word-piece vectors in each context, at every hidden state."""

    tok = loaded.tokenizer
    if not getattr(tok, "is_fast", False):
        raise UnsupportedModelError(
            "finding a word's tokens needs a fast tokenizer (with offsets); this model has a slow one"
        )
    contexts = sorted(set(data.context1) | set(data.context2))
    where = {c: i for i, c in enumerate(contexts)}
    tokenized = tokenize(loaded, tuple(contexts), max_length)
    enc = tok(
        contexts, truncation=True, max_length=tokenized.max_length, return_offsets_mapping=True
    )

    problems: list[str] = []
    requests: dict[int, list[tuple[int, int, list[int]]]] = {}  # context index: (row, side, idx)
    usable = []
    for r, (word, c1, c2) in enumerate(zip(data.word, data.context1, data.context2, strict=True)):
        spans = []
        for side, context in ((1, c1), (2, c2)):
            found = find_word_span(context, word)
            if found is None:
                problems.append(
                    f"row {r + 1}: {word!r} does not occur in context {side} ({context[:60]!r}); row skipped"
                )
                break
            t = where[context]
            idx = token_span(enc["offset_mapping"][t], tokenized.special[t], found)
            if not idx:
                problems.append(
                    f"row {r + 1}: {word!r} in context {side} lies beyond "
                    f"the first {tokenized.max_length} tokens; row skipped"
                )
                break
            spans.append((t, side, idx))
        else:
            usable.append(r)
            for t, side, idx in spans:
                requests.setdefault(t, []).append((len(usable) - 1, side, idx))
    if not usable:
        raise InputError(f"{data.name}: no usable rows. " + "; ".join(problems[:3]))

    num_states, d = loaded.info.num_layers + 1, loaded.info.hidden_size
    first = np.zeros((num_states, len(usable), d))
    second = np.zeros((num_states, len(usable), d))
    needed = sorted(requests)
    sub = type(tokenized)(
        [tokenized.input_ids[t] for t in needed],
        [tokenized.special[t] for t in needed],
        [tokenized.word_ids[t] for t in needed],
        tokenized.truncated,
        tokenized.max_length,
    )
    for batch_ids, hidden, _ in forward_batches(loaded, sub, batch_size, progress):
        for row_in_batch, b in enumerate(batch_ids):
            for slot, side, idx in requests[needed[b]]:
                vec = to_numpy(hidden[:, row_in_batch, idx, :].double().mean(dim=1))  # (S, d)
                (first if side == 1 else second)[:, slot] = vec
    return WordSenseVectors(
        first, second, data.same_sense[usable], np.array(usable, dtype=np.int64), tuple(problems)
    )


@dataclass(frozen=True)
class ThresholdSweep:
    """Accuracy of 'same sense iff cosine > threshold' for every distinct threshold."""

    thresholds: np.ndarray
    accuracy: np.ndarray
    best_threshold: float
    best_accuracy: float


def threshold_sweep(cosines: np.ndarray, same: np.ndarray) -> ThresholdSweep:
    """Every cut between consecutive distinct cosines (plus below the lowest and above the highest);
    the best threshold is the one with the highest accuracy (the lowest such one on ties)."""
    cosines = np.asarray(cosines, dtype=np.float64)
    same = np.asarray(same, dtype=bool)
    if len(cosines) == 0:
        raise InputError("no rows to sweep a threshold over")
    u = np.unique(cosines)
    thresholds = np.concatenate([[u[0] - 1e-9], (u[:-1] + u[1:]) / 2, [u[-1] + 1e-9]])
    pos = np.sort(cosines[same])
    neg = np.sort(cosines[~same])
    # correct = positives above t + negatives at or below t
    correct = (len(pos) - np.searchsorted(pos, thresholds, side="right")) + np.searchsorted(
        neg, thresholds, side="right"
    )
    accuracy = correct / len(cosines)
    best = int(np.argmax(accuracy))
    return ThresholdSweep(thresholds, accuracy, float(thresholds[best]), float(accuracy[best]))


def loo_accuracy(cosines: np.ndarray, same: np.ndarray) -> float:
    """Leave-one-out accuracy: each row is predicted with the best threshold of the other rows."""
    cosines = np.asarray(cosines, dtype=np.float64)
    same = np.asarray(same, dtype=bool)
    n = len(cosines)
    if n < 2:
        return float("nan")
    hits = 0
    for i in range(n):
        keep = np.arange(n) != i
        t = threshold_sweep(cosines[keep], same[keep]).best_threshold
        hits += int((cosines[i] > t) == same[i])
    return hits / n


def word_sense_by_state(
    vectors: WordSenseVectors,
    clip_dims: Sequence[Sequence[int]],
    fitted: Sequence | None = None,
    state_names: Sequence[str] | None = None,
) -> list[dict]:
    """Per hidden state: best-threshold accuracy, its threshold and the leave-one-out accuracy, raw
    and clipped (``clip_dims[s]`` zeroed), and after ``fitted[s]`` (a fitted post-processor) if given."""

    num_states = vectors.first.shape[0]
    names = list(state_names) if state_names is not None else hidden_state_names(num_states - 1)
    rows = []
    for s in range(num_states):
        a, b = vectors.first[s], vectors.second[s]
        dims = [int(j) for j in clip_dims[s]]
        variants = {"raw": (a, b), "clipped": (_clip(a, dims), _clip(b, dims))}
        if fitted is not None:
            variants["processed"] = (fitted[s].transform(a), fitted[s].transform(b))
        row = {"index": s, "name": names[s], "clipped_dims": dims}
        for label, (x, y) in variants.items():
            cos = cosine_rows(x, y)
            sweep = threshold_sweep(cos, vectors.same_sense)
            row[f"{label}_accuracy"] = sweep.best_accuracy
            row[f"{label}_threshold"] = sweep.best_threshold
            row[f"{label}_loo_accuracy"] = loo_accuracy(cos, vectors.same_sense)
        rows.append(row)
    return rows


def word_sense_sweeps(
    vectors: WordSenseVectors, state: int, clip_dims: Sequence[int], fitted=None
) -> dict[str, ThresholdSweep]:
    """The threshold sweeps behind :func:`word_sense_by_state` at one hidden state (for plotting)."""
    a, b = vectors.first[state], vectors.second[state]
    variants = {"raw": (a, b), "clipped": (_clip(a, clip_dims), _clip(b, clip_dims))}
    if fitted is not None:
        variants["processed"] = (fitted.transform(a), fitted.transform(b))
    return {
        k: threshold_sweep(cosine_rows(x, y), vectors.same_sense) for k, (x, y) in variants.items()
    }


def fit_on_token_sample(
    result: ExtractionResult, postprocess: str, params: dict | None = None
) -> list:
    """One :mod:`isoscope.analysis.projections.postprocess` transformer per hidden state, fitted on that state's token
    sample of an ExtractionResult (the corpus), to apply to word vectors from other texts."""

    return [
        make_postprocessor(postprocess, **(params or {})).fit(
            np.asarray(result.sample_vectors[s], dtype=np.float64)
        )
        for s in range(result.num_states)
    ]
