"""The Clipping & projections page (pages/projections.py): post-process a hidden state and compare
PCA / UMAP / t-SNE before and after, with the metric deltas and the exports."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from isoscope.analysis.anisotropy import N_PAIRS
from isoscope.analysis.projections.methods import (
    METHODS,
    TEXT_COLOURS,
    TSNE_SLOW_POINTS,
    Colouring,
    Projection,
    before_after,
    coordinates_frame,
    hover_contexts,
    media_colouring,
    metric_deltas,
    projection_sample,
    text_colouring,
    text_lengths,
    text_snippets,
    token_colour_options,
    token_colouring,
)
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult, mean_pooled
from isoscope.engine.extraction.media import model_view
from isoscope.engine.inputs.media import MediaCorpus
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import SEED
from isoscope.plots.projections import (
    before_after_figure,
    explained_variance_text,
    patch_thumbnails,
)
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.server.warmup import EXPECTED_SECONDS
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.exports import export_buttons
from isoscope.ui.sharing.links import state_index
from isoscope.ui.widgets.charts import live_chart
from isoscope.ui.widgets.controls import PostChoice, interval_number, postprocessing_controls
from isoscope.ui.widgets.ranges import PROJ_ALL_TOKENS, PROJ_DATA, PROJ_METHOD
from isoscope.ui.work.cached import cached, heavy
from isoscope.ui.work.corpora import get_corpus
from isoscope.ui.work.media import thumbnail_caption
from isoscope.ui.work.results import outlier_dims_by_state


@dataclass(frozen=True)
class Points:
    """What the controls chose to project: token sample or pooled texts, the hidden state, the
    method, the post-processing, how many points (of ``available``) and the seed."""

    data_kind: str
    state: int
    method: str
    post: PostChoice
    size: int
    seed: int
    available: int

    @property
    def unit(self) -> str:
        return "tokens" if self.data_kind == "token sample" else "texts"


MAX_POOLED_TEXTS = 5000  # texts mean-pooled for the text view (seeded sample)


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
    of :func:`isoscope.plots.projections.patch_thumbnails`; None for other analyses, or when the
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


def controls(result: ExtractionResult) -> Points:
    """The points, state, projection, post-processing, size and seed (``st.stop()`` while the
    post-processing's input is invalid)."""
    names = result.state_names
    d = result.hidden_size
    detected_by_state = outlier_dims_by_state(result)
    with_outliers = [s for s, dims in enumerate(detected_by_state) if dims]
    default_state = with_outliers[-1] if with_outliers else result.num_states - 1
    c1, c2, c3, c4 = st.columns([1.1, 0.8, 0.8, 1.5])
    data_kind = c1.radio(
        "Points",
        PROJ_DATA.options if result.input_kind == "text" else PROJ_DATA.options[:1],
        key="proj_data",
        horizontal=True,
        help="Token vectors from the extraction's random token sample, one mean-pooled vector per "
        "text, or every token of the chosen state (a second pass over the corpus).",
    )
    state = c2.selectbox(
        "Hidden state",
        range(result.num_states),
        index=state_index(names, default_state, "proj_state"),
        format_func=lambda s: names[s],
        key="proj_state",
        help="'emb' is the embedding output (index 0); 1…L are the layers' outputs.",
    )
    method = c3.selectbox(
        "Projection", PROJ_METHOD.options, format_func=METHODS.get, key="proj_method"
    )
    p1, p3, p4 = st.columns([1.5, 1.0, 0.6])
    choice = postprocessing_controls(
        "proj",
        d,
        (c4, p1),
        clip_dims=detected_by_state[state],
        clip_label=f"Dimensions to clip at state {names[state]}",
        clip_key=f"clip_dims_{state}",
    )
    if choice is None:
        st.stop()

    every = data_kind == PROJ_ALL_TOKENS
    available = result.num_tokens if every else available_points(result, data_kind)
    unit = "tokens" if data_kind == "token sample" else "texts"
    if available > 200 and not every:
        size = int(
            p3.number_input(
                f"Points ({unit})",
                100,
                available,
                min(available, 4000),
                step=500,
                key=f"proj_size_{data_kind}",
                help="A seeded random sample; a larger one contains every point of a smaller one.",
            )
        )
    else:
        size = available
    seed = int(interval_number(p4, "Seed", SEED, "proj_seed", help=None))
    return Points(data_kind, state, method, choice, size, seed, available)


def points_caption(result: ExtractionResult, points: Points) -> None:
    """How many points are projected, and a warning before a slow t-SNE."""
    data_kind, method, size, available, unit = (
        points.data_kind, points.method, points.size, points.available, points.unit
    )  # fmt: skip
    total = result.num_tokens if data_kind == "token sample" else result.num_texts
    st.caption(
        f"**{size:,} of {total:,} {unit}** projected"
        + (
            f" (the extraction kept a random sample of {available:,}; raise *Token sample* in the sidebar for more)."
            if data_kind == "token sample"
            else (
                f" (a seeded sample of {available:,} texts is pooled)."
                if available < total
                else " (every text is pooled)."
            )
        )
    )
    if method == "tsne" and size > TSNE_SLOW_POINTS:
        st.warning(
            f"t-SNE on {size:,} points takes a while on a small CPU (openTSNE, FFT-accelerated: about "
            "28 s for 20,000 points on an idle 2-core machine), and this page runs it twice (raw and "
            "post-processed). Lower the number of points for a quick look; results are cached."
        )


def shown_method(method: str, warmup) -> str:
    """UMAP's first fit in a process compiles numba kernels: PCA until the warm-up is done."""
    shown_method = method
    if method == "umap" and not warmup.ready:
        shown_method = "pca"

        @fragment(run_every=2.0)
        def umap_waiting() -> None:
            if warmup.ready:
                st.rerun()
            st.progress(
                warmup.fraction(),
                text=(
                    f"UMAP is compiling in the background ({warmup.elapsed:.0f} "
                    f"s of about {EXPECTED_SECONDS:.0f} s, once per "
                    "server process). Showing PCA meanwhile; the page switches to UMAP when it is ready."
                ),
            )

        umap_waiting()
    elif method == "umap" and warmup.error:
        st.warning(
            f"The UMAP warm-up failed ({literal(warmup.error)}); UMAP will compile on its first fit."
        )
    return shown_method


def projections_or_stop(
    loaded: LoadedModel, result: ExtractionResult, points: Points, shown_method: str
) -> tuple[Projection, Projection]:
    """Raw and post-processed projections (or an error and ``st.stop()``)."""
    data_kind, state, choice, size, seed = (
        points.data_kind, points.state, points.post, points.size, points.seed
    )  # fmt: skip
    spinner = f"Running {METHODS[shown_method]} on {size:,} points, raw and post-processed…"
    try:
        with st.spinner(spinner):
            before, after = projections(
                loaded, result, data_kind, state, shown_method, choice, size, seed
            )
    except IsoscopeError as exc:
        st.error(f"**Cannot project these vectors.** {message(exc)}")
        st.stop()
    return before, after


@fragment
def chart_section(
    loaded: LoadedModel, result: ExtractionResult, points: Points, shown_method: str,
    before: Projection, after: Projection,
) -> None:  # fmt: skip
    """Colour choice and the figure (a fragment: recolouring reruns only this section)."""
    data_kind, state, post, size, seed = (
        points.data_kind,
        points.state,
        points.post,
        points.size,
        points.seed,
    )
    names = result.state_names
    colour_options = token_colour_options(result) if data_kind == "token sample" else TEXT_COLOURS
    colour_by = st.selectbox(
        "Colour by",
        list(colour_options),
        format_func=colour_options.get,
        key=f"proj_colour_{data_kind}",
    )
    fig = projection_figure(
        loaded, result, data_kind, state, shown_method, post, size, seed, colour_by
    )
    live_chart(fig, key="proj_chart")
    if data_kind == "token sample":
        thumbnail_caption(result, thumbnail_counts(loaded, result, data_kind, size, seed))
    left, right = st.columns(2)
    left.caption(explained_variance_text(before))
    right.caption(explained_variance_text(after))
    if post.name == "whiten" and shown_method == "pca":
        st.caption(
            "After whitening every direction has unit variance on the fitted sample, so PCA axes "
            "are nearly arbitrary there: look at UMAP or t-SNE instead."
        )
    _, ids, hover = projection_points(result, data_kind, size, seed)
    colouring = projection_colours(result, data_kind, size, seed, colour_by)
    download_buttons(
        "proj",
        fig=fig,
        frame=coordinates_frame(before, after, colouring, hover, ids),
        name=f"projection_{shown_method}_{names[state]}_{post.name}",
    )


def exports(
    loaded: LoadedModel, result: ExtractionResult, points: Points, shown_method: str,
    before: Projection, after: Projection,
) -> None:  # fmt: skip
    """Embedding Projector and embedding-atlas downloads of the projected points."""
    data_kind, state, choice, size, seed = (
        points.data_kind, points.state, points.post, points.size, points.seed
    )  # fmt: skip
    token_points = data_kind == "token sample"
    rows, _, _ = projection_points(result, data_kind, size, seed)
    pooled, pooled_ids = (None, None) if token_points else pooled_texts(loaded, result)
    clip_dims = choice.options.get("dims", ()) if choice.name == "clip" else ()
    export_buttons(
        result,
        state,
        points="token" if token_points else "text",
        clip_dims=list(clip_dims),
        rows=rows,
        coords=(after if choice.name == "clip" else before).coords,
        method=shown_method,
        pooled=pooled,
        text_ids=pooled_ids,
    )


def deltas_section(loaded: LoadedModel, result: ExtractionResult, points: Points) -> None:
    """Isotropy metrics of every fitted vector, raw and post-processed."""
    names = result.state_names
    data_kind, state, choice, available, unit = (
        points.data_kind, points.state, points.post, points.available, points.unit
    )  # fmt: skip
    st.subheader(f"What the post-processing changes at state {names[state]}")
    deltas = projection_deltas(loaded, result, data_kind, state, choice)
    deltas_frame = pd.DataFrame(deltas)
    st.dataframe(
        deltas_frame,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.4f") for c in ("raw", "processed", "change")
        },
    )
    st.caption(
        f"Fitted and measured on all {available:,} {unit} of the "
        f"{'token sample' if unit == 'tokens' else 'pooled texts'}"
        " (not only the projected points). IsoScore is blank when there are fewer points than dimensions."
    )
    download_buttons(
        "proj_deltas", frame=deltas_frame, name=f"metric_deltas_{names[state]}_{choice.name}"
    )


def explain() -> None:
    explainer(
        "What is this / references",
        f"""
**Post-processing** is fitted on the vectors of the chosen hidden state and applied to the same vectors; the
model's weights are untouched.
- *Clip outlier dimensions*: set chosen dimensions to 0 (Luo, Kulmizev & Mao 2021, *Positional Artefacts
  Propagate Through Masked Language Model Embeddings*, arXiv 2011.04393). Pre-filled with the dimensions
  detected at this state.
- *Mean-centering* and *all-but-the-top*: subtract the mean, then remove the top D principal components
  (Mu & Viswanath 2018, *All-but-the-Top*, arXiv 1702.01417).
- *Standardisation*: z-score each dimension (Timkey & van Schijndel 2021, *All Bark and No Bite: Rogue
  Dimensions…*, arXiv 2109.04404, find it the best fix).
- *Whitening*: y = (x − μ) U diag(1/√s) (Su et al. 2021, *Whitening Sentence Representations*, arXiv 2103.15316).

**Projections**, the same points and colours in both panels:
- *PCA*: the two directions of largest variance. A rogue dimension with a huge mean or variance takes over
  the first axis; after clipping the rest of the geometry shows.
- *UMAP* (McInnes, Healy & Melville 2018, arXiv 1802.03426) and *t-SNE* (van der Maaten & Hinton 2008,
  *Visualizing Data using t-SNE*, JMLR 9) keep neighbourhoods, not distances: cluster sizes and the gaps
  between clusters mean little. Both run on a 50-dimensional PCA of the vectors first (skipped after
  whitening), with a fixed seed. t-SNE (openTSNE, FFT-accelerated above 10,000 points) takes about 28 s
  for 20,000 points on 2 idle CPU cores; UMAP about 7 s for 5,000 and 16 s for 20,000 once compiled;
  PCA about a second for 20,000.

**Metric deltas**: anisotropy is the mean cosine of {N_PAIRS:,} random pairs of vectors from different texts
(Ethayarajh 2019, arXiv 1909.00512); IsoScore measures how evenly the variance spreads over all directions
(Rudman et al. 2022, arXiv 2108.07344; it ignores the mean, unlike the mean cosine); the top dimension's share
is Timkey & van Schijndel's per-dimension split of the mean cosine.

Hover a point to see the token in its text (±8 tokens). Colour *by frequency* uses log10 of how often the
token string occurs in the whole corpus. Mean-pooled texts average every non-padding token, like
sentence-transformers.
""",
    )
