"""Typed cached analyses for the pages: one function per derived result, keyed by cheap values.

Every wrapper is ``@cached`` (heavy work ``@heavy``): the one cache idiom of the pages and
views, which never build a memo key by hand. Its arguments become the key of
:func:`ui.common.memo` (an ExtractionResult by :func:`ui.common.result_key`, a LoadedModel by
its fingerprint, a corpus or pairs by content hash, everything else by value; big arrays are
refused as keys; an argument named ``_x`` is left out), so two pages asking for the same thing
share one computation. Wrappers call backend functions only; a wrapper that passes its
arguments through has the name of what it wraps (``criteria_by_state`` is
:func:`backend.analysis.geometry.outliers.criteria_by_state`, memoised), and one that adapts them
(fixes the pairs and seed, reads the texts from the result) is named for what it returns.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from backend.analysis.geometry import outliers as geometry_outliers
from backend.analysis.geometry import similarity as geometry_similarity
from backend.analysis.geometry.isotropy import (
    HISTOGRAM_BINS,
    N_PAIRS,
    PAIR_SEED,
    StateIsotropy,
    anisotropy_by_state,
    by_state,
)
from backend.analysis.geometry.outliers import (
    OutlierThresholds,
    headline_dims,
)
from backend.analysis.geometry.outliers import outlier_dims_by_state as headline_dims_by_state
from backend.analysis.geometry.postprocess import make_postprocessor
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
from backend.analysis.geometry.similarity import (
    ThresholdSweep,
    WordSenseVectors,
    clip_dims_by_state,
    sts_by_state,
    word_sense_by_state,
    word_sense_sweeps,
)
from backend.analysis.layernorm.ablation import AblationReport, SweepResult, run_ablation, sweep
from backend.analysis.positional import grid as positional_grid
from backend.analysis.positional import table as positional_table
from backend.analysis.positional import tupe as positional_tupe
from backend.analysis.positional.grid import GridProbe, patch_cosines
from backend.analysis.positional.nope import (
    NopeSettings,
    VarianceCurves,
    variance_lab_pair,
    variance_on_model,
)
from backend.analysis.positional.qk import QKStats, qk_stats
from backend.analysis.positional.table import (
    PositionTableReport,
    ProbeResult,
    ProbeSettings,
    analyse_position_table,
)
from backend.analysis.positional.tupe import TupeSummary, TupeText, tupe_summary
from backend.engine import extraction as engine_extraction
from backend.engine import models as engine_models
from backend.engine.cache import cached_extract
from backend.engine.corpus import Corpus
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import (
    ExtractionResult,
    ExtractionSettings,
    mean_pooled,
)
from backend.engine.extraction.media import model_view
from backend.engine.inputs import MediaCorpus
from backend.engine.layout import PatchPositionTable, patch_position_table
from backend.engine.models import LoadedModel
from backend.engine.pairs import SentencePairs, WordSenseRows, evaluated_texts, sts_sample
from backend.engine.throughput import token_counts
from backend.plots.outliers import (
    dimension_by_category,
    outlier_frame_all,
    token_dim_heatmap,
)
from backend.plots.outliers import outlier_heatmap as plot_outlier_heatmap
from backend.plots.projections import before_after_figure, patch_thumbnails
from ui.common import get_corpus, memo, memo_heavy, result_key
from ui.controls import PostChoice

P = ParamSpec("P")
R = TypeVar("R")
DEFAULT_THRESHOLDS = OutlierThresholds()
MAX_POOLED_TEXTS = 5000  # texts mean-pooled for the projection page's text view (seeded sample)


def _key_of(value: Any) -> Any:
    if isinstance(value, ExtractionResult):
        return ("result", result_key(value))
    if isinstance(value, LoadedModel):
        return ("model", value.fingerprint)
    if isinstance(value, SentencePairs | WordSenseRows | MediaCorpus | Corpus):  # content hash
        return (type(value).__name__, value.sha)
    if isinstance(value, np.ndarray):
        raise TypeError("arrays are not cheap cache keys: pass the result and an index instead")
    if isinstance(value, list | tuple):
        return tuple(_key_of(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key_of(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, repr(value))
    return value


def _arguments_key(signature: inspect.Signature, args: tuple, kwargs: dict) -> tuple:
    """The key of one call: every argument by name, except those whose name starts with an
    underscore (as ``st.cache_data`` does), which the other arguments already identify (a scan
    passed along beside the settings that made it)."""
    bound = signature.bind_partial(*args, **kwargs)
    bound.apply_defaults()  # f(x) and f(x, default) share one entry
    return tuple(
        (name, _key_of(v)) for name, v in bound.arguments.items() if not name.startswith("_")
    )


def cached(fn: Callable[P, R]) -> Callable[P, R]:
    """Memoise ``fn`` process-wide, keyed by its name and its (cheap) arguments."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        key = _arguments_key(signature, args, kwargs)
        return memo(name, key, lambda: fn(*args, **kwargs))

    return wrapper


def heavy(
    label: str | Callable[..., str], unit: str = ""
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """:func:`cached` for heavy work: ``fn(..., progress=...)`` runs once for every session in
    the server's fair queue (:func:`ui.common.memo_heavy`), on a worker thread, so it must not
    call Streamlit; the waiting sessions show ``label`` (or ``label(*args, **kwargs)``, e.g. one
    naming the model) with the shared progress."""

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        name = f"{fn.__module__}.{fn.__qualname__}"
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            key = _arguments_key(signature, args, kwargs)
            text = label(*args, **kwargs) if callable(label) else label
            return memo_heavy(
                name, key, text, lambda progress: fn(*args, progress=progress, **kwargs), unit
            )

        return wrapper

    return decorate


# ----------------------------------------------------------------------------- outliers


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
def outlier_frame(
    result: ExtractionResult, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> pd.DataFrame:
    """Every hidden state's flagged dims with their statistics (the page's CSV download)."""
    return outlier_frame_all(result, criteria_by_state(result, thresholds))


@cached
def outlier_heatmap(
    result: ExtractionResult, stat: str, thresholds: OutlierThresholds = DEFAULT_THRESHOLDS
) -> go.Figure:
    """The layers x dimensions heatmap of one statistic with the criteria's markers."""
    return plot_outlier_heatmap(result, stat, thresholds)


@cached
def token_heatmap(
    loaded: LoadedModel,
    result: ExtractionResult,
    text_index: int,
    state: int,
    thresholds: OutlierThresholds = DEFAULT_THRESHOLDS,
) -> go.Figure:
    """One text's token vectors at one hidden state, its headline outlier dims marked."""
    hidden, tokens = encode_text(loaded, result.texts[text_index], result.settings.max_length)
    marked = headline_dims(criteria_by_state(result, thresholds)[state])
    return token_dim_heatmap(hidden[state], tokens.token, result.state_names[state], marked)


@cached
def category_box(result: ExtractionResult, state: int, dim: int) -> go.Figure:
    """One dimension's sampled values split by token type."""
    values = np.asarray(result.sample_vectors[state][:, dim])
    return dimension_by_category(values, sample_categories(result), dim, result.state_names[state])


@cached
def sample_categories(result: ExtractionResult) -> np.ndarray:
    """Token category (position 0 / special / punctuation / other) of every sampled token."""
    return result.sample_tokens.category()


@cached
def encode_text(loaded: LoadedModel, text: str, max_length: int):
    """Hidden states (S, T, d) and token table of one text (Outlier dimensions page)."""
    return engine_extraction.encode_text(loaded, text, max_length)


@cached
def corpus_token_counts(loaded: LoadedModel, corpus: Corpus, max_length: int) -> list[int]:
    """Tokens per text of ``corpus`` for ``loaded`` (the first look's estimate)."""
    return token_counts(loaded.tokenizer, corpus.texts, max_length)


# ----------------------------------------------------------------------------- isotropy


@cached
def anisotropy(result: ExtractionResult) -> np.ndarray:
    """Mean cosine of N_PAIRS random different-text pairs per hidden state (Ethayarajh 2019)."""
    return anisotropy_by_state(result, N_PAIRS, PAIR_SEED)


@cached
def isotropy(
    result: ExtractionResult,
    post: str = "none",
    params: tuple = (),
    *,
    bins: int = HISTOGRAM_BINS,
    similarity: bool = True,
    name: str | None = None,
) -> StateIsotropy:
    """:func:`backend.analysis.geometry.isotropy.by_state` after the post-processing ``post`` with ``params``
    (``(("dims", "auto"),)`` clips each state's own headline outlier dims)."""
    options = dict(params)
    if post == "none":
        processor = None
    elif post == "clip" and options.get("dims") == "auto":
        auto = outlier_dims_by_state(result)
        processor = lambda s: make_postprocessor("clip", dims=auto[s])  # noqa: E731
    else:
        processor = make_postprocessor(post, **options)
    return by_state(
        result,
        processor,
        n_pairs=N_PAIRS,
        seed=PAIR_SEED,
        bins=bins,
        similarity=similarity,
        name=name or post,
    )


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


# ----------------------------------------------------------------------------- similarity

Clip = str | tuple[int, ...]  # "auto", "corpus" or typed dims


@heavy("Mean-pooling sentences:")
def pool_pairs(
    loaded: LoadedModel, pairs: SentencePairs, max_length: int, batch_size: int, *, progress
) -> tuple[np.ndarray, np.ndarray]:
    """Mean-pooled vectors (S, n, d) of both sides of the sentence pairs."""
    return geometry_similarity.pool_pairs(loaded, pairs, max_length, batch_size, progress)


@heavy("Extracting the evaluated sentences (for their outlier dims):", "texts")
def evaluated_extraction(
    loaded: LoadedModel, texts: tuple[str, ...], name: str, max_length: int, batch_size: int, *,
    progress,
) -> ExtractionResult:  # fmt: skip
    """The evaluated sentences' extraction, on which clip "auto" detects the outlier dims (as the
    ``sts`` command does; through the disk cache)."""
    settings = ExtractionSettings(max_length=max_length, batch_size=batch_size)
    return cached_extract(loaded, Corpus(texts, name), settings, progress)


def _clip_dims(
    loaded: LoadedModel,
    result: ExtractionResult,
    data: SentencePairs | WordSenseRows,
    clip: Clip,
    first: np.ndarray,
    second: np.ndarray,
) -> list[list[int]]:
    """The dims to clip per state: "auto" = each state's outlier dims on the evaluated sentences
    (the one meaning of "auto"), "corpus" = those of the sidebar corpus, or typed dims."""
    if clip == "corpus":
        return outlier_dims_by_state(result)
    if clip == "auto":
        settings = result.settings
        texts = evaluated_texts(data)
        evaluated = evaluated_extraction(
            loaded, texts, data.name, settings.max_length, settings.batch_size
        )
        return clip_dims_by_state("auto", first, second, result=evaluated)
    return clip_dims_by_state(list(clip), first, second, result=result)


@cached
def sts_scores(
    loaded: LoadedModel,
    result: ExtractionResult,
    pairs: SentencePairs,
    clip: Clip,
    post: str | None,
) -> list[dict]:
    """STS Spearman x 100 per hidden state: raw, clipped and optionally post-processed."""
    max_length, batch_size = result.settings.max_length, result.settings.batch_size
    first, second = pool_pairs(loaded, pairs, max_length, batch_size)
    dims = _clip_dims(loaded, result, pairs, clip, first, second)
    return sts_by_state(first, second, pairs.scores, dims, post, state_names=result.state_names)


@cached
def word_vectors(
    loaded: LoadedModel, rows: WordSenseRows, max_length: int, batch_size: int
) -> WordSenseVectors:
    """The target word's vectors in both contexts of every row."""
    return geometry_similarity.word_vectors(loaded, rows, max_length, batch_size)


@cached
def fit_on_token_sample(result: ExtractionResult, post: str) -> list:
    """One post-processor per hidden state, fitted on the corpus's token sample."""
    return geometry_similarity.fit_on_token_sample(result, post)


def _sense_inputs(
    loaded: LoadedModel, result: ExtractionResult, rows: WordSenseRows, clip: Clip, post
) -> tuple[WordSenseVectors, list[list[int]], list | None]:
    vectors = word_vectors(loaded, rows, result.settings.max_length, result.settings.batch_size)
    dims = _clip_dims(loaded, result, rows, clip, vectors.first, vectors.second)
    return vectors, dims, fit_on_token_sample(result, post) if post else None


@cached
def word_senses(
    loaded: LoadedModel,
    result: ExtractionResult,
    rows: WordSenseRows,
    clip: Clip,
    post: str | None,
) -> list[dict]:
    """Word-sense accuracy per hidden state: raw, clipped and optionally post-processed."""
    vectors, dims, fitted = _sense_inputs(loaded, result, rows, clip, post)
    return word_sense_by_state(vectors, dims, fitted, state_names=result.state_names)


@cached
def sense_sweeps(
    loaded: LoadedModel,
    result: ExtractionResult,
    rows: WordSenseRows,
    clip: Clip,
    post: str | None,
    state: int,
) -> dict[str, ThresholdSweep]:
    """The threshold sweeps at one hidden state."""
    vectors, dims, fitted = _sense_inputs(loaded, result, rows, clip, post)
    return word_sense_sweeps(vectors, state, dims[state], fitted[state] if fitted else None)


# ----------------------------------------------------------------------------- LayerNorm


@heavy("Ablation runs:", "batches")
def ablation_report(
    model: LoadedModel,
    texts: tuple[str, ...] | MediaCorpus,
    dims: tuple[int, ...],
    norms: tuple[str, ...],
    controls: int,
    with_sts: bool,
    max_length: int,
    *,
    progress,
) -> AblationReport:
    """Disable ``dims`` in ``norms`` against ``controls`` random-dimension controls (BERT Busters);
    ``texts`` may be images or clips (a :class:`MediaCorpus`, keyed by its content hash)."""
    pairs = None
    if with_sts:
        sample = sts_sample()
        pairs = (sample.sentence1, sample.sentence2, sample.scores)
    return run_ablation(
        model,
        _inputs(texts),
        list(dims),
        norms=list(norms),
        random_controls=controls,
        seed=0,
        max_length=max_length,
        pairs=pairs,
        progress=progress,
    )


@heavy("Ablated (press Stop in the top-right to leave; it stops when nobody waits):", "dims")
def dim_sweep(
    model: LoadedModel, texts: tuple[str, ...] | MediaCorpus, max_length: int, *, progress
) -> SweepResult:
    """Every dimension ablated alone in the default LayerNorms (16 ablated copies per pass)."""
    return sweep(model, _inputs(texts), max_length=max_length, copies=16, progress=progress)


def _inputs(texts: tuple[str, ...] | MediaCorpus) -> list:
    """What the ablation runs on: the texts, or the images / clips of a media corpus."""
    return list(texts.items) if isinstance(texts, MediaCorpus) else list(texts)


# ----------------------------------------------------------------------------- positional


@cached
def position_table_weights(loaded: LoadedModel) -> np.ndarray:
    """The learned absolute position table (positions, d)."""
    return positional_table.position_table_weights(loaded)


@cached
def position_report(loaded: LoadedModel, n: int, offset: int) -> PositionTableReport:
    """Cosines, PCA and extreme dims of the first ``n`` position vectors."""
    return analyse_position_table(position_table_weights(loaded), n, offset)


@heavy("Training position probes:")
def probe_result(result: ExtractionResult, settings: ProbeSettings, *, progress) -> ProbeResult:
    """Linear position probes per hidden state (Luo et al. 2021, section 4)."""
    return positional_table.probe_result(result, settings, progress)


@cached
def patch_table(loaded: LoadedModel) -> PatchPositionTable | None:
    """The position embeddings an image model adds to its patches (None: it adds none)."""
    return patch_position_table(loaded.encoder, loaded.layout)


@cached
def patch_similarities(loaded: LoadedModel) -> np.ndarray:
    """(rows, cols, rows, cols) cosines between patch position embeddings (ViT paper, Fig. 7)."""
    return patch_cosines(patch_table(loaded))


@heavy("Training row / column probes:")
def grid_probe(result: ExtractionResult, settings: ProbeSettings, *, progress) -> GridProbe:
    """The patch row and column probes per hidden state of an image analysis."""
    return positional_grid.grid_probe(result, settings, progress)


@heavy("Decomposing first-layer logits:", "texts")
def tupe_terms(
    loaded: LoadedModel, result: ExtractionResult, n_texts: int, *, progress
) -> TupeSummary:
    """TUPE term shares of the first layer's logits over the first ``n_texts`` texts."""
    max_length = int(result.settings.max_length)
    return tupe_summary(loaded, result.texts, max_length, n_texts, progress)


@cached
def decompose_text(loaded: LoadedModel, text: str, max_length: int) -> TupeText:
    """TUPE terms of one text's first-layer logits."""
    return positional_tupe.decompose_text(loaded, text, max_length)


@heavy("Random models:")
def variance_lab(
    settings: NopeSettings, masks: tuple[bool, ...], *, progress
) -> list[VarianceCurves]:
    """Attention-output variance vs position of random NoPE models (Chi et al. 2023)."""
    return variance_lab_pair(settings, progress, masks)


@heavy("Running the model:", "texts")
def model_variance(loaded: LoadedModel, result: ExtractionResult, *, progress) -> VarianceCurves:
    """The variance measurement on the selected model and corpus."""
    return variance_on_model(loaded, result.texts, result.settings.max_length, progress=progress)


@cached
def random_like(loaded: LoadedModel) -> LoadedModel:
    """The same architecture with fresh weights (seed 0)."""
    return engine_models.random_like(loaded, seed=0)


def queries_keys(
    loaded: LoadedModel,
    result: ExtractionResult,
    n_texts: int,
    max_length: int,
    random_init: bool,
    rotation: str = "applied",
) -> QKStats:
    """Mean query / key statistics per query head on the first ``n_texts`` texts (Godey et al.),
    with the rotary embedding ``applied`` or from ``before`` it."""
    model = random_like(loaded) if random_init else loaded  # here: a worker thread has no session
    if random_init:
        label = "random init"
    else:
        label = "trained" if not loaded.info.random_init else loaded.info.display_name
    return _queries_keys(model, result, n_texts, max_length, label, rotation)


@heavy("Queries and keys:", "texts")
def _queries_keys(
    model: LoadedModel, result: ExtractionResult, n_texts: int, max_length: int, label: str,
    rotation: str, *, progress,
) -> QKStats:  # fmt: skip
    texts = result.texts[:n_texts]
    return qk_stats(model, texts, max_length, label=label, progress=progress, rotation=rotation)
