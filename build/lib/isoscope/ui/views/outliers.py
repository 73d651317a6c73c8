"""The Outlier dimensions page (pages/outliers.py): the four criteria's thresholds, the layers x
dims heatmap, the dims of one hidden state, a per-text view and the token-type split. Each section
is a fragment: its own controls rerun only that section."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from isoscope.analysis.outliers import (
    CRITERIA,
    CRITERION_LABELS,
    EXTREME_SHARE,
    QUANTILE,
    VARIANCE_FACTOR,
    ZSCORE_K,
    OutlierThresholds,
    headline_dims,
    strongest_dims,
)
from isoscope.engine import extraction as engine_extraction
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.plots.outliers import (
    CRITERION_SHORT,
    HEATMAP_STATS,
    category_summary,
    dimension_by_category,
    headline_outlier,
    outlier_frame_all,
    outliers_payload,
    state_outlier_frame,
    token_dim_heatmap,
)
from isoscope.plots.outliers import outlier_heatmap as plot_outlier_heatmap
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.links import dimension_links, state_index
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import interval_slider
from isoscope.ui.widgets.ranges import OUT_STAT
from isoscope.ui.work.cached import cached
from isoscope.ui.work.results import DEFAULT_THRESHOLDS, criteria_by_state

# ----------------------------------------------------------------------------- cached calls


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


def explain() -> None:
    explainer(
        "What is this / how to read it / references",
        """
A few coordinates ("**outlier**" or "**rogue**" dimensions) of a Transformer's hidden states take values
far larger than all others, in almost every token. They dominate cosine similarity and distances, so
they decide much of what "similar" means for the model's vectors.

**What to look for**
- In the heatmap, a dimension that is a dark stripe through several layers. In the bundled
  all-MiniLM-L6-v2, **dimension 223** is strongly negative in hidden states 1–5 (a mean near −3
  where typical means are about 0.1) and vanishes in the last layer, whose LayerNorm zeroes it.
- Switch the colour to *argmin share*: a real outlier holds the minimum of most token vectors.
- In the per-text view the outlier column stays the same colour for every token: it carries almost
  no information about the word.
- In the token-type split, compare position 0 ([CLS]) and punctuation with other tokens
  (Timkey & van Schijndel found rogue dimensions track them).

**The four criteria** (thresholds are the sliders; hidden states are `emb` = embedding output, then
`1 … L` = output of each layer):
1. *Extreme-index frequency* (Luo, Kulmizev & Mao 2021): a dimension holding the minimum or maximum
   of at least the given share of all tokens.
2. *Mean-magnitude z-score* (Timkey & van Schijndel 2021; Kovaleva et al. 2021): the dimension's mean
   lies more than *k* standard deviations from the average of all dimensions' means.
3. *Quantile rule* (Macocco et al. 2025): the median |value| of the dimension exceeds the given
   quantile of all |values| (computed on the token sample).
4. *Variance rule* (Rudman et al. 2023): the dimension's variance is at least *factor* times the average.

**Sources**
- Luo, Kulmizev & Mao 2021, *Positional Artefacts Propagate Through Masked Language Model Embeddings*,
  [arXiv 2011.04393](https://arxiv.org/abs/2011.04393) (BERT-base: one dimension is the minimum of
  96.6 % of token vectors).
- Timkey & van Schijndel 2021, *All Bark and No Bite: Rogue Dimensions in Transformer Language Models
  Obscure Representational Quality*, [arXiv 2109.04404](https://arxiv.org/abs/2109.04404).
- Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, *BERT Busters: Outlier Dimensions that Disrupt
  Transformers*, [arXiv 2105.06990](https://arxiv.org/abs/2105.06990) (bert-base-uncased: dims 308, 381).
- Macocco et al. 2025 (quantile definition of outlier dimensions) and Rudman et al. 2023 (variance
  definition), as summarised in docs/methods.md section 1.
""",
    )


def criteria_controls() -> OutlierThresholds:
    """The four criteria's thresholds (sliders)."""
    st.subheader("Outlier criteria")
    c1, c2, c3, c4 = st.columns(4)
    extreme_share = interval_slider(c1, "Extreme-index share ≥", EXTREME_SHARE, "out_thr_extreme")
    zscore_k = interval_slider(c2, "z-score of mean >", ZSCORE_K, "out_thr_z")
    quantile = interval_slider(
        c3, "Median |value| > quantile", QUANTILE, "out_thr_q", format="%.3f"
    )
    variance_factor = interval_slider(c4, "Variance ≥ × average", VARIANCE_FACTOR, "out_thr_var")
    thresholds = OutlierThresholds(extreme_share, zscore_k, quantile, variance_factor)
    return thresholds


def headline(result: ExtractionResult, by_state: list[dict[str, list[int]]]) -> None:
    """What to notice: the strongest flagged dimension, or that none passes."""
    headline = headline_outlier(result, by_state)
    if headline:
        st.info(
            f"**What to notice:** dimension **{headline['dim']}** is flagged in hidden state(s) "
            f"{', '.join(headline['states'])}; at hidden state {headline['state']} its mean is "
            f"{headline['mean']:+.2f}, against a typical |mean| of {headline['typical']:.2f}."
        )
    else:
        st.info("No dimension passes the z-score or extreme-index criterion at these thresholds.")


@fragment
def heatmap_section(result: ExtractionResult, thresholds: OutlierThresholds) -> None:
    """Layers x dimensions heatmap coloured by one statistic, with the criteria's markers."""
    st.subheader("Every hidden state, every dimension")
    stat = st.radio("Colour by", OUT_STAT.options, horizontal=True, key="out_stat")
    st.caption(
        f"Colour: {HEATMAP_STATS[stat]}. Markers show the outlier dims of each criterion (toggle them in the legend)."
    )
    heat_fig = outlier_heatmap(result, stat, thresholds)
    chart_with_downloads(
        heat_fig,
        key="out_heatmap",
        downloads="out_heatmap",
        name=f"isoscope_outlier_heatmap_{stat.strip('|')}",
    )


# ----------------------------------------------------------------------------- one hidden state
@fragment
def state_section(
    loaded: LoadedModel,
    result: ExtractionResult,
    by_state: list[dict[str, list[int]]],
    thresholds: OutlierThresholds,
) -> None:
    """The criteria's dims at one hidden state, one text token by token, one dim by token type."""
    names = result.state_names
    st.subheader("Outlier dims of one hidden state")
    default_state = max(1, result.num_layers // 2) if result.num_layers >= 1 else 0
    state_name = st.select_slider(
        "Hidden state",
        names,
        value=names[state_index(names, default_state, "out_state", by_name=True)],
        key="out_state",
    )
    state = names.index(state_name)
    found = by_state[state]
    cols = st.columns(4)
    for col, criterion in zip(cols, CRITERIA, strict=True):
        dims = found[criterion]
        col.metric(
            CRITERION_SHORT[criterion], f"{len(dims)} dims", help=CRITERION_LABELS[criterion]
        )
        col.caption(
            ", ".join(map(str, dims[:20])) + (" …" if len(dims) > 20 else "") if dims else "none"
        )
    st.markdown(dimension_links(state, headline_dims(found, result.mean[state])))
    frame = state_outlier_frame(result, state, found)
    if frame.empty:
        st.caption("No dimension is flagged by any criterion at this hidden state.")
    else:
        st.dataframe(frame, hide_index=True, width="stretch", key="out_table")
    st.caption("Downloads cover every hidden state at the current thresholds.")
    download_buttons(
        "out_table",
        frame=outlier_frame(result, thresholds),
        json_data=outliers_payload(result, by_state, thresholds),
        name="isoscope_outlier_dims",
    )
    # lazy (ui/frame/tabs.py): a hidden-state change redraws the open view, not both
    lazy_tabs(
        ["One dimension by token type", "One text, token by token"],
        [
            lambda: category_view(result, state, state_name, found),
            lambda: text_view(loaded, result, state, state_name, thresholds),
        ],
        key="out_view",
    )


@fragment
def text_view(
    loaded: LoadedModel,
    result: ExtractionResult,
    state: int,
    state_name: str,
    thresholds: OutlierThresholds,
) -> None:
    """Every token of one text at the chosen hidden state (a fragment: the text number reruns
    only this view)."""
    if result.input_kind != "text":
        st.caption(
            "The per-text token view reads one text; for images and audio it is not built yet."
        )
        return
    st.subheader("One text, token by token")
    text_index = int(
        st.number_input(
            f"Text number (0 – {result.num_texts - 1})",
            0,
            result.num_texts - 1,
            0,
            1,
            key="out_text",
        )
    )
    text = result.texts[text_index]
    st.markdown(f"> {literal(text[:500])}{'…' if len(text) > 500 else ''}")
    try:
        text_fig = token_heatmap(loaded, result, text_index, state, thresholds)
    except IsoscopeError as exc:
        st.error(f"Cannot encode this text: {message(exc)}")
        return
    st.plotly_chart(text_fig, width="stretch", key="out_text_heatmap")
    st.caption(
        f"Hidden state {state_name} (chosen above); triangles mark its z-score / extreme-index outliers."
    )


@fragment
def category_view(
    result: ExtractionResult, state: int, state_name: str, found: dict[str, list[int]]
) -> None:
    """One dimension's values split by token type (a fragment: the dimension reruns only this)."""
    st.subheader("One dimension, split by token type")
    flagged = headline_dims(found, result.mean[state])
    default_dim = flagged[0] if flagged else strongest_dims(result.mean[state], 1)[0]
    dim = int(
        st.number_input(
            f"Dimension (0 – {result.hidden_size - 1}); default: strongest outlier of state {state_name}",
            0,
            result.hidden_size - 1,
            int(default_dim),
            1,
            key=f"out_dim_{state}",
        )
    )
    st.markdown(dimension_links(state, [dim]))
    values = result.sample_vectors[state][:, dim]
    left, right = st.columns([2, 1])
    with left:
        st.plotly_chart(category_box(result, state, dim), width="stretch", key="out_dim_box")
    with right:
        st.dataframe(
            category_summary(values, sample_categories(result)),
            hide_index=True,
            width="stretch",
            key="out_dim_table",
        )
        st.caption(
            f"On the token sample ({len(values):,} of {result.num_tokens:,} tokens). Position 0 is the first "
            "token of each text ([CLS] for BERT); special tokens are the other [SEP]/[CLS]-style tokens."
        )
