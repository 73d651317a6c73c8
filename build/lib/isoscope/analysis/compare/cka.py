"""Linear CKA (Kornblith, Norouzi, Lee & Hinton 2019, arXiv 1905.00414), plain and debiased (Song et
al. 2012's unbiased HSIC), and the CKA of every hidden state of A against every one of B, on the same
sampled tokens when both extractions have them, else on mean-pooled text vectors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from isoscope.engine.errors import InputError

if TYPE_CHECKING:  # type hints only: importing them would pull in torch
    from isoscope.engine.extraction import ExtractionResult
    from isoscope.engine.load.models import LoadedModel

BASES = ("tokens", "texts")


def _stack_centred(
    arrays: Sequence[np.ndarray] | np.ndarray,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Column-centred float64 copies of ``arrays`` side by side in one (n, sum d) array (one
    allocation, ready for a single matrix product), and a view of each block."""
    shapes = [np.shape(a) for a in arrays]
    if any(len(shape) != 2 for shape in shapes):
        raise InputError(f"CKA needs 2-D arrays (inputs x dims), got shapes {shapes}")
    rows = {shape[0] for shape in shapes}
    if len(rows) != 1:
        raise InputError(f"CKA needs the same inputs on both sides; got {sorted(rows)} rows")
    edges = np.concatenate([[0], np.cumsum([shape[1] for shape in shapes])]).astype(int)
    stacked = np.empty((rows.pop(), int(edges[-1])), dtype=np.float64)
    blocks = []
    for a, lo, hi in zip(arrays, edges[:-1], edges[1:], strict=True):
        block = stacked[:, lo:hi]
        block[...] = a
        block -= block.mean(axis=0, keepdims=True)
        blocks.append(block)
    return stacked, blocks


def _debiased_term(
    product: float, rows_x: np.ndarray, rows_y: np.ndarray, total_x: float, total_y: float, n: int
) -> float:
    """Unbiased HSIC numerator (Song et al. 2012) of linear kernels from feature-space terms, as in
    Kornblith et al.'s reference code: ``product`` is ||X^T Y||_F^2 of the centred features,
    ``rows_*`` the squared row norms (the kernels' diagonals), ``total_*`` their sums."""
    return (
        product - n / (n - 2.0) * float(rows_x @ rows_y) + total_x * total_y / ((n - 1) * (n - 2))
    )


def linear_cka(x: np.ndarray, y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA of two representations of the same n inputs, (n, d1) and (n, d2); float64.

    1 for identical representations (or an orthogonal map / isotropic scaling of one another).
    NaN when either side has no variance. ``debiased`` needs n >= 4.
    """
    return float(cka_matrix([x], [y], debiased=debiased)[0, 0])


def cka_matrix(
    xs: Sequence[np.ndarray] | np.ndarray,
    ys: Sequence[np.ndarray] | np.ndarray,
    debiased: bool = False,
) -> np.ndarray:
    """Linear CKA of every representation in ``xs`` against every one in ``ys`` (all with the
    same n rows): float64 (len(xs), len(ys)).

    Every cross term ||X_i^T Y_j||_F^2 comes from one matrix product of the stacked, centred
    features (the cost is n x sum(d1) x sum(d2)); the self terms from one product per state.
    """
    if len(xs) == 0 or len(ys) == 0:
        raise InputError("CKA needs at least one hidden state on each side")
    stacked_x, cx = _stack_centred(xs)
    stacked_y, cy = _stack_centred(ys)
    n = stacked_x.shape[0]
    if stacked_y.shape[0] != n:
        raise InputError(
            f"CKA needs the same inputs on both sides; got {n} and {stacked_y.shape[0]} rows"
        )
    if n < (4 if debiased else 2):
        raise InputError(
            f"CKA needs at least {4 if debiased else 2} inputs (tokens or texts), got {n}"
        )
    cross = stacked_x.T @ stacked_y  # every ||X_i^T Y_j|| from one product: (sum d1, sum d2)
    edges_x = np.concatenate([[0], np.cumsum([c.shape[1] for c in cx])])
    edges_y = np.concatenate([[0], np.cumsum([c.shape[1] for c in cy])])
    self_x = [float(np.linalg.norm(c.T @ c) ** 2) for c in cx]  # ||X^T X||_F^2
    self_y = [float(np.linalg.norm(c.T @ c) ** 2) for c in cy]
    rows_x = [np.einsum("ij,ij->i", c, c) for c in cx]
    rows_y = [np.einsum("ij,ij->i", c, c) for c in cy]
    out = np.full((len(cx), len(cy)), np.nan)
    for i in range(len(cx)):
        norm_x = self_x[i]
        if debiased:
            norm_x = _debiased_term(
                norm_x, rows_x[i], rows_x[i], rows_x[i].sum(), rows_x[i].sum(), n
            )
        for j in range(len(cy)):
            block = cross[edges_x[i] : edges_x[i + 1], edges_y[j] : edges_y[j + 1]]
            top = float(np.sum(block * block))
            norm_y = self_y[j]
            if debiased:
                top = _debiased_term(top, rows_x[i], rows_y[j], rows_x[i].sum(), rows_y[j].sum(), n)
                norm_y = _debiased_term(
                    norm_y, rows_y[j], rows_y[j], rows_y[j].sum(), rows_y[j].sum(), n
                )
            denom = np.sqrt(max(norm_x, 0.0)) * np.sqrt(max(norm_y, 0.0))
            if denom > 1e-300 * max(1.0, abs(top)):
                out[i, j] = top / denom
    return out


def same_tokens(result_a: ExtractionResult, result_b: ExtractionResult) -> bool:
    """True when both token samples are the same tokens of the same texts (text, position and token
    string row by row), so CKA can pair their sample vectors directly."""
    if result_a.corpus_sha != result_b.corpus_sha:
        return False
    ta, tb = result_a.sample_tokens, result_b.sample_tokens
    return (
        len(ta) == len(tb)
        and np.array_equal(ta.text_id, tb.text_id)
        and np.array_equal(ta.position, tb.position)
        and np.array_equal(ta.token, tb.token)
    )


@dataclass(frozen=True)
class CKAResult:
    """CKA of every hidden state of A (rows) against every hidden state of B (columns).

    ``basis`` is "tokens" (the same sampled tokens in both extractions) or "texts" (mean-pooled
    text vectors, used when the tokenizations differ); ``n`` is the number of paired inputs.
    """

    matrix: np.ndarray
    basis: str
    n: int
    debiased: bool
    note: str = ""

    @property
    def diagonal(self) -> np.ndarray:
        k = min(self.matrix.shape)
        return np.array([self.matrix[i, i] for i in range(k)])


def representation_similarity(
    loaded_a: LoadedModel | None,
    result_a: ExtractionResult,
    loaded_b: LoadedModel | None,
    result_b: ExtractionResult,
    *,
    debiased: bool | None = None,
    progress=None,
    inputs=None,
) -> CKAResult:
    """Linear CKA, states of A x states of B, on the same tokens when possible, else on texts.

    Tokens: when :func:`same_tokens` holds (same corpus, same tokenization, same settings, hence
    the same seeded token sample), the sample vectors are paired row by row. Texts: otherwise,
    mean-pooled vectors of every text (:func:`isoscope.engine.extraction.mean_pooled`), which needs both
    loaded models. ``debiased=None`` (auto) uses the debiased estimator on the text basis, where n
    is small. Raises :class:`InputError` when the two extractions are of different corpora (CKA
    compares representations of the same inputs). ``inputs`` are what the texts basis pools: the
    corpus's texts (default ``result_a.texts``), or its images / clips (``MediaCorpus.items``,
    which a result does not keep: an image analysis names its items by path only).
    """
    if result_a.corpus_sha != result_b.corpus_sha:
        raise InputError(
            "CKA compares two representations of the same inputs, but these extractions are of "
            "different corpora; compare two models on one corpus"
        )
    if same_tokens(result_a, result_b):
        use_debiased = bool(debiased) if debiased is not None else False
        matrix = cka_matrix(
            list(result_a.sample_vectors), list(result_b.sample_vectors), debiased=use_debiased
        )
        return CKAResult(matrix, "tokens", len(result_a.sample_index), use_debiased)
    if loaded_a is None or loaded_b is None:
        raise InputError(
            "the two models tokenize the corpus differently, so CKA needs mean-pooled text "
            "vectors: pass both loaded models"
        )
    from isoscope.engine.extraction import mean_pooled

    media = result_a.input_kind != "text"
    if media and inputs is None:
        raise InputError(
            "the two models cut these images or clips into different tokens, so CKA needs "
            "mean-pooled item vectors: pass the corpus's items (inputs=corpus.items)"
        )
    items = result_a.texts if inputs is None else inputs
    max_length = result_a.settings.max_length
    batch = result_a.settings.batch_size
    pooled_a = mean_pooled(loaded_a, items, max_length, batch, progress)
    pooled_b = mean_pooled(loaded_b, items, max_length, batch, progress)
    use_debiased = True if debiased is None else bool(debiased)
    matrix = cka_matrix(list(pooled_a), list(pooled_b), debiased=use_debiased)
    return CKAResult(
        matrix,
        "texts",
        pooled_a.shape[1],
        use_debiased,
        note=(
            "the two models cut the inputs into different tokens, so CKA uses mean-pooled "
            "vectors (one per image or clip) instead of token vectors"
            if media
            else "the two models tokenize the corpus differently, so CKA uses mean-pooled text "
            "vectors (one per text) instead of token vectors"
        ),
    )
