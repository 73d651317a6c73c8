"""Cached analyses that several pages share, keyed by cheap values (the idiom of :mod:`ui.cached`):
a result's outlier criteria and headline dims (Outliers, Overview, LayerNorm, Positional,
Similarity, Projections and the server's prewarm), its anisotropy (Overview and prewarm), a
corpus's token counts (the first look), and the projection page's points, colourings and
figures. One function each, so two pages asking for the same thing share one computation.
A function used by one page only lives in that page's view (ui/views/<page>.py).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from backend.analysis.geometry import outliers as geometry_outliers
from backend.analysis.geometry.isotropy import N_PAIRS, PAIR_SEED, anisotropy_by_state
from backend.analysis.geometry.outliers import OutlierThresholds
from backend.analysis.geometry.outliers import outlier_dims_by_state as headline_dims_by_state
from backend.analysis.geometry.projections import (
    Colouring,
    Projection,
    before_after,
    hover_contexts,
    media_colouring,
    metric_deltas,
    projection_sample,
    text_colouring,
    text_lengths,
    text_snippets,
    token_colouring,
)
from backend.engine.corpus import Corpus
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import ExtractionResult, mean_pooled
from backend.engine.extraction.media import model_view
from backend.engine.inputs import MediaCorpus
from backend.engine.models import LoadedModel
from backend.engine.throughput import token_counts
from backend.plots.projections import before_after_figure, patch_thumbnails
from ui.cached import cached, heavy
from ui.common import get_corpus
from ui.controls import PostChoice

DEFAULT_THRESHOLDS = OutlierThresholds()
MAX_POOLED_TEXTS = 5000  # texts mean-pooled for the projection page's text view (seeded sample)


# ----------------------------------------------------------------------------- outliers and isotropy


@cached
def criteria_by_state(
    result: ExtractionResult, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> list[dict[str, list[int]]]:
    """:func:`backend.analysis.geometry.outliers.criteria_by_state`: all four criteria at every hidden state."""
    return geometry_outliers.criteria_by_state(result, thresholds)


@cached
def outlier_dims_by_state(
    result: ExtractionResult, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> list[list[int]]:
    """The headline outlier dims (z-score or extreme-index) of every state, by |mean| descending."""
    return headline_dims_by_state(result, criteria=criteria_by_state(result, thresholds))


@cached
def corpus_token_counts(loaded: LoadedModel, corpus: Corpus, max_length: int) -> list[int]:
    """Tokens per text of ``corpus`` for ``loaded`` (the first look's estimate)."""
    return token_counts(loaded.tokenizer, corpus.texts, max_length)


@cached
def anisotropy(result: ExtractionResult) -> np.ndarray:
    """Mean cosine of N_PAIRS random different-text pairs per hidden state (Ethayarajh 2019)."""
    return anisotropy_by_state(result, N_PAIRS, PAIR_SEED)


# ----------------------------------------------------------------------------- projections


def pooled_text_ids(result: ExtractionResult, limit: int = MAX_POOLED_TEXTS) -> np.ndarray:
    """The seeded sample of up to ``limit`` texts that the text view mean-pools."""
    return projection_sample(result.num_texts, limit, 0)


@heavy("Mean-pooling texts:")
def pooled_texts(
    loaded: LoadedModel, result: ExtractionResult, limit: int = MAX_POOLED_TEXTS, *, progress
) -> tuple[np.ndarray, np.ndarray]:
    """Mean-pooled vectors (S, n, d) of the texts of :func:`pooled_text_ids`, and those ids."""
    ids = pooled_text_ids(result, limit)
    vectors = mean_pooled(
        loaded,
        [result.texts[i] for i in ids],
        result.settings.max_length,
        result.settings.batch_size,
        progress,
    )
    return vectors, ids


def fit_vectors(
    loaded: LoadedModel, result: ExtractionResult, data_kind: str, state: int
) -> tuple[np.ndarray, np.ndarray]:
    """The vectors of one state that post-processing is fitted on (token sample or pooled
    texts), and their text ids."""
    if data_kind == "token sample":
        return result.sample_vectors[state], result.tokens.text_id[result.sample_index]
    pooled, ids = pooled_texts(loaded, result)
    return pooled[state], np.arange(len(ids))


def available_points(result: ExtractionResult, data_kind: str) -> int:
    if data_kind == "token sample":
        return len(result.sample_index)
    return min(result.num_texts, MAX_POOLED_TEXTS)


@cached
def projection_points(
    result: ExtractionResult, data_kind: str, size: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows into the fitted vectors, token or text ids, hover label) of the projected points."""
    rows = projection_sample(available_points(result, data_kind), size, seed)
    if data_kind == "token sample":
        ids = result.sample_index[rows]
        return rows, ids, hover_contexts(result.tokens, ids)
    ids = pooled_text_ids(result)[rows]
    return rows, ids, text_snippets([result.texts[i] for i in ids])


@cached
def projection_colours(
    result: ExtractionResult, data_kind: str, size: int, seed: int, by: str
) -> Colouring:
    rows, ids, _ = projection_points(result, data_kind, size, seed)
    if data_kind == "token sample" and result.input_kind != "text":
        return media_colouring(result, result.sample_tokens.take(rows), by)
    if data_kind == "token sample":
        return token_colouring(result.sample_tokens.take(rows), result.tokens, by)
    return text_colouring(text_lengths(result.tokens, result.num_texts)[ids], by)


@cached
def projections(
    loaded: LoadedModel,
    result: ExtractionResult,
    data_kind: str,
    state: int,
    method: str,
    post: PostChoice,
    size: int,
    seed: int,
) -> tuple[Projection, Projection]:
    """Raw and post-processed projections of the sampled points of one hidden state."""
    vectors, _ = fit_vectors(loaded, result, data_kind, state)
    rows, _, _ = projection_points(result, data_kind, size, seed)
    return before_after(vectors, rows, method, post.name, post.options, seed)


@cached
def projection_figure(
    loaded: LoadedModel,
    result: ExtractionResult,
    data_kind: str,
    state: int,
    method: str,
    post: PostChoice,
    size: int,
    seed: int,
    colour_by: str,
) -> go.Figure:
    """The before/after figure, built once per (projection, colouring)."""
    before, after = projections(loaded, result, data_kind, state, method, post, size, seed)
    _, _, hover = projection_points(result, data_kind, size, seed)
    colouring = projection_colours(result, data_kind, size, seed, colour_by)
    name = result.state_names[state]
    titles = (f"raw · state {name}", f"{post.label} · state {name}")
    thumbnails = projection_thumbnails(loaded, result, data_kind, size, seed)
    return before_after_figure(before, after, colouring, hover, titles, thumbnails=thumbnails)


def projection_thumbnails(
    loaded: LoadedModel, result: ExtractionResult, data_kind: str, size: int, seed: int
) -> list[str] | None:
    """Patch thumbnails of the projected points of an image analysis, within the payload budget
    of :func:`backend.plots.projections.patch_thumbnails`; None for other analyses, or when the
    images are not at hand (a saved analysis opened without its folder)."""
    if data_kind != "token sample" or result.input_kind != "image":
        return None
    try:
        corpus = get_corpus()
    except IsoscopeError:
        return None
    if getattr(corpus, "sha", None) != result.corpus_sha or not hasattr(corpus, "items"):
        return None
    return _thumbnails(loaded, result, corpus, size, seed)


@cached
def _thumbnails(
    loaded: LoadedModel, result: ExtractionResult, corpus: MediaCorpus, size: int, seed: int
) -> list[str]:
    _, ids, _ = projection_points(result, "token sample", size, seed)
    tokens = result.tokens.take(ids)
    views: dict[int, np.ndarray] = {}

    def view_of(image: int) -> np.ndarray:
        if image not in views:
            views[image] = model_view(loaded, corpus.items[image])
        return views[image]

    grid = tuple(result.model.get("patch_grid") or (1, 1))
    return patch_thumbnails(view_of, tokens.text_id, tokens.word_id, grid)


def thumbnail_counts(
    loaded: LoadedModel, result: ExtractionResult, data_kind: str, size: int, seed: int
) -> tuple[int, int] | None:
    """(points with a thumbnail, patch points) of the projection; None when it has none to give
    (not an image analysis, or the images are not at hand)."""
    thumbnails = projection_thumbnails(loaded, result, data_kind, size, seed)
    if thumbnails is None:
        return None
    _, ids, _ = projection_points(result, data_kind, size, seed)
    return sum(1 for uri in thumbnails if uri), int((result.tokens.word_id[ids] >= 0).sum())


@cached
def projection_deltas(
    loaded: LoadedModel, result: ExtractionResult, data_kind: str, state: int, post: PostChoice
) -> list[dict]:
    """Isotropy metrics of all fitted vectors of one state, raw and post-processed."""
    vectors, text_id = fit_vectors(loaded, result, data_kind, state)
    return metric_deltas(vectors, text_id, post.name, post.options)
