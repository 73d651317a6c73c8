"""The Position embeddings tab: the learned position table's cosines, PCA, extreme dims and
the embedding LayerNorm (Luo et al. 2021; BERT Busters)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from isoscope.analysis.positional import table as positional_table
from isoscope.analysis.positional.table import (
    PositionTableReport,
    analyse_position_table,
    embedding_layernorm,
    extreme_dims_vs_outliers,
    position_offset,
)
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel, position_table
from isoscope.plots import positional as plots
from isoscope.ui.frame.literal import literal
from isoscope.ui.frame.page import explainer, load_or_stop
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.positional.grid import patch_table_view
from isoscope.ui.views.positional.shared import SOURCES, outliers_by_name, rotary_note
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.work.cached import cached


@cached
def position_table_weights(loaded: LoadedModel) -> np.ndarray:
    """The learned absolute position table (positions, d)."""
    return positional_table.position_table_weights(loaded)


@cached
def position_report(loaded: LoadedModel, n: int, offset: int) -> PositionTableReport:
    """Cosines, PCA and extreme dims of the first ``n`` position vectors."""
    return analyse_position_table(position_table_weights(loaded), n, offset)


@cached
def embedding_norm(loaded: LoadedModel):
    """(name, gamma, beta) of the first norm on word + position embeddings, or None."""
    return embedding_layernorm(loaded)


def position_embeddings_tab() -> None:
    """Position table: cosine between positions, PCA, extreme dims, embedding LayerNorm (Luo et al.; BERT Busters)."""
    loaded, result = load_or_stop()
    # Whisper's encoder adds a table of frames (fixed sinusoids): the table views apply to it
    frame_table = result.input_kind == "audio" and position_table(loaded) is not None
    if result.input_kind != "text" and not frame_table:
        patch_table_view(loaded, result)
        return
    if frame_table:
        frame_table_caption(loaded)
    position_table_explainer()
    if position_table(loaded) is None:
        if not rotary_note(loaded.info, "table"):
            st.info(
                f"**{literal(loaded.info.display_name)}** has no learned absolute position table (position embeddings: "
                f"{loaded.info.position_embedding}). Pick the default model or a random BERT/GPT-2 in the sidebar; "
                "the variance lab tab works without one."
            )
    else:
        position_table_views(loaded, result)


def frame_table_caption(loaded: LoadedModel) -> None:
    """What a position is in an audio model's table of frames (Whisper)."""
    st.caption(
        f"**{literal(loaded.info.display_name)}** adds a table of audio frame positions "
        f"({loaded.info.position_embedding}); a position is one "
        f"{1000 / (loaded.info.frames_per_second or 1):g} ms frame of the clip. Whisper's table "
        "is fixed sinusoids, not learned, so its geometry is the formula's (Radford et al. "
        "2022, arXiv 2212.04356); the embedding LayerNorm view does not apply."
    )


def position_table_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
The **position-embedding table** of an absolute-position model holds one learned vector per position; it is added
to the word embedding before the first layer. Shown: the cosine similarity between position vectors (neighbours
are similar, far positions dissimilar or anti-correlated), their first two principal components, and each
position vector's **extreme dimensions**: the share of positions whose maximum (minimum) sits in dimension j.
Luo et al. found that BERT's position vectors carry the same outlier dimension as the hidden states (in
RoBERTa, dim 588 is the max of 99.8 % of position vectors) and traced the outliers to positional information.
BERT Busters' authors dispute this and blame the **embedding LayerNorm**, whose γ/β the *Embedding LayerNorm*
view shows with the hidden-state outliers (★/red) of the current extraction.

Sources: {SOURCES["luo"]}; {SOURCES["busters"]}.
""",
    )


def position_table_views(loaded: LoadedModel, result: ExtractionResult) -> None:
    """The first N rows of the table: cosine & PCA, extreme dims, embedding LayerNorm (lazy tabs)."""
    offset = position_offset(loaded)
    usable = position_table_weights(loaded).shape[0] - offset
    n = st.slider(
        "Positions shown",
        8,
        int(usable),
        int(min(128, usable)),
        step=8 if usable >= 16 else 1,
        key="pos_emb_n",
        help="The first N positions of the table (all of them use the same rows at every layer).",
    )
    report = position_report(loaded, n, offset)
    found = outliers_by_name(result)
    all_outliers = sorted({j for dims in found.values() for j in dims})

    # lazy (ui/frame/tabs.py): arriving on the page, or moving the slider, draws one view, not four
    # charts
    lazy_tabs(
        ["Cosine & PCA", "Extreme dimensions", "Embedding LayerNorm"],
        [
            lambda: table_geometry_view(report),
            lambda: table_extreme_view(report, found, all_outliers),
            lambda: embedding_layernorm_view(loaded, all_outliers),
        ],
        key="pos_emb_view",
    )
    st.caption(
        f"Hidden-state outliers (z-score or extreme-index criterion) of the current extraction: "
        f"{', '.join(map(str, all_outliers)) or 'none'}."
    )


def table_geometry_view(report: PositionTableReport) -> None:
    c1, c2 = st.columns(2)
    with c1:
        fig_cos = plots.cosine_heatmap(report.cosine)
        chart_with_downloads(
            fig_cos,
            key="pos_emb_cos_chart",
            downloads="pos_emb_cos",
            frame=pd.DataFrame(report.cosine),
            name="position_cosine",
        )
    with c2:
        fig_pca = plots.position_pca(report.pca_coords, report.pca_explained)
        chart_with_downloads(
            fig_pca,
            key="pos_emb_pca_chart",
            downloads="pos_emb_pca",
            frame=pd.DataFrame(report.pca_coords, columns=["PC1", "PC2", "PC3"])
            .rename_axis("position")
            .reset_index(),
            name="position_pca",
        )


def table_extreme_view(
    report: PositionTableReport, found: dict[str, list[int]], all_outliers: list[int]
) -> None:
    fig_ext = plots.extreme_share_bars(report.argmax_share, report.argmin_share, all_outliers)
    st.plotly_chart(fig_ext, width="stretch", key="pos_emb_ext_chart")
    rows = pd.DataFrame(extreme_dims_vs_outliers(report, found))
    st.dataframe(rows, hide_index=True, width="stretch")
    download_buttons("pos_emb_ext", fig=fig_ext, frame=rows, name="position_extreme_dims")


def embedding_layernorm_view(loaded: LoadedModel, all_outliers: list[int]) -> None:
    ln = embedding_norm(loaded)
    if ln is None:
        st.info(f"**{literal(loaded.info.display_name)}** has no embedding LayerNorm.")
        return
    name, gamma, beta = ln
    fig_ln = plots.layernorm_params(gamma, beta, name, all_outliers)
    chart_with_downloads(
        fig_ln,
        key="pos_emb_ln_chart",
        downloads="pos_emb_ln",
        frame=pd.DataFrame({"dim": range(len(gamma)), "gamma": gamma, "beta": beta}),
        name="embedding_layernorm",
    )
