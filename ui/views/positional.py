"""The five views of the Positional information page (pages/positional.py), one function per tab:
position embeddings, position probe, TUPE decomposition, variance lab (NoPE), queries & keys.
Each runs only while its tab is open (lazy tabs); the arithmetic lives in backend.analysis.positional."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from backend.analysis.positional import grid as positional_grid
from backend.analysis.positional import nope
from backend.analysis.positional import table as positional_table
from backend.analysis.positional import tupe as positional_tupe
from backend.analysis.positional.grid import GridProbe, patch_cosines
from backend.analysis.positional.nope import NopeSettings, VarianceCurves, variance_on_model
from backend.analysis.positional.qk import METRICS, ROTATIONS, QKStats, qk_stats
from backend.analysis.positional.summaries import variance_slope_table
from backend.analysis.positional.table import (
    PositionTableReport,
    ProbeResult,
    ProbeSettings,
    analyse_position_table,
    contribution_table,
    embedding_layernorm,
    extreme_dims_vs_outliers,
    position_offset,
)
from backend.analysis.positional.tupe import (
    REGIONS,
    TERMS,
    TupeSummary,
    TupeText,
    supports_tupe,
    tupe_summary,
)
from backend.engine import models as engine_models
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import ExtractionResult
from backend.engine.layout import PatchPositionTable, patch_position_table, position_scheme_note
from backend.engine.models import LoadedModel, position_table
from backend.plots import positional as plots
from ui.cached import cached, heavy
from ui.common import download_buttons, explainer, load_or_stop, show_notices
from ui.inputs import applies_to_text
from ui.results import outlier_dims_by_state
from ui.tabs import lazy_tabs

# ----------------------------------------------------------------------------- cached calls


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
def variance_lab_pair(
    settings: NopeSettings, masks: tuple[bool, ...], *, progress
) -> list[VarianceCurves]:
    """Attention-output variance vs position of random NoPE models (Chi et al. 2023)."""
    return nope.variance_lab_pair(settings, progress, masks)


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


TABS = [
    "Position embeddings",
    "Position probe",
    "TUPE decomposition",
    "Variance lab (NoPE)",
    "Queries & keys",
]

SOURCES = {
    "luo": "Luo, Kulmizev & Mao 2021, *Positional Artefacts Propagate Through Masked Language "
    "Model Embeddings* (arXiv 2011.04393)",
    "busters": "Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, *BERT Busters: Outlier "
    "Dimensions that Disrupt Transformers* (arXiv 2105.06990)",
    "tupe": "Ke, He & Liu 2021, *Rethinking Positional Encoding in Language Pre-training* (TUPE, arXiv 2006.15595)",
    "chi": "Chi, Fan, Chen, Rudnicky & Ramadge 2023, *Latent Positional Information is in the "
    "Self-Attention Variance of Transformer Language Models Without Positional Embeddings* "
    "(arXiv 2305.13571)",
    "vit": "Dosovitskiy et al. 2020, *An Image is Worth 16x16 Words: Transformers for Image "
    "Recognition at Scale* (ViT, arXiv 2010.11929), Fig. 7",
    "godey": "Godey, de la Clergerie & Sagot 2023, *Is Anisotropy Inherent to Transformers?* (arXiv 2306.07656)",
    "rope": "Su, Lu, Pan, Murtadha, Wen & Liu 2021, *RoFormer: Enhanced Transformer with Rotary "
    "Position Embedding* (arXiv 2104.09864)",
}


_ROTARY_WHY = {
    "table": "there is no position-embedding table to plot: RoPE adds nothing to the token embeddings",
    "tupe": "TUPE's split needs an additive position embedding inside the first layer's input "
    "(LN(w + p)); RoPE instead rotates every layer's queries and keys by a position-dependent angle, "
    "so the logit q_i·k_j has no separate position term to split out",
}


def rotary_note(info, view: str) -> bool:
    """For a rotary (RoPE) model, explain why the position-table or TUPE view does not apply and
    point to the position probe; returns False (and shows nothing) for other models."""
    if "rotary" not in str(info.position_embedding).lower():
        return False
    st.info(
        f"**{info.display_name}** uses rotary position embeddings (RoPE; Su et al. 2021, "
        f"arXiv 2104.09864), so {_ROTARY_WHY[view]}. Whether the hidden states still carry absolute "
        "position is measurable: open the **Position probe** tab, which trains a linear probe on the "
        "hidden states of every layer.",
        icon=":material/rotate_right:",
    )
    return True


@cached
def embedding_norm(loaded: LoadedModel):
    """(name, gamma, beta) of the first norm on word + position embeddings, or None."""
    return embedding_layernorm(loaded)


def outliers_by_name(result: ExtractionResult) -> dict[str, list[int]]:
    """Headline outlier dims of every hidden state, by state name."""
    return dict(zip(result.state_names, outlier_dims_by_state(result), strict=True))


def text_extraction(what: str, why: str) -> tuple[LoadedModel, ExtractionResult] | None:
    """The selection's model and extraction when they are of texts; None for images and audio,
    where the view ``what`` (which ``why``) does not apply, as the page then says."""
    loaded, result = load_or_stop()
    return (loaded, result) if applies_to_text(result, what, why) else None


# ----------------------------------------------------------------------------- position embeddings
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
                f"**{loaded.info.display_name}** has no learned absolute position table (position embeddings: "
                f"{loaded.info.position_embedding}). Pick the default model or a random BERT/GPT-2 in the sidebar; "
                "the variance lab tab works without one."
            )
    else:
        position_table_views(loaded, result)


def frame_table_caption(loaded: LoadedModel) -> None:
    """What a position is in an audio model's table of frames (Whisper)."""
    st.caption(
        f"**{loaded.info.display_name}** adds a table of audio frame positions "
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

    # lazy (ui/tabs.py): arriving on the page, or moving the slider, draws one view, not four
    # charts (issue 15)
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
        st.plotly_chart(fig_cos, width="stretch", key="pos_emb_cos_chart")
        download_buttons(
            "pos_emb_cos",
            fig=fig_cos,
            frame=pd.DataFrame(report.cosine),
            name="position_cosine",
        )
    with c2:
        fig_pca = plots.position_pca(report.pca_coords, report.pca_explained)
        st.plotly_chart(fig_pca, width="stretch", key="pos_emb_pca_chart")
        download_buttons(
            "pos_emb_pca",
            fig=fig_pca,
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
        st.info(f"**{loaded.info.display_name}** has no embedding LayerNorm.")
        return
    name, gamma, beta = ln
    fig_ln = plots.layernorm_params(gamma, beta, name, all_outliers)
    st.plotly_chart(fig_ln, width="stretch", key="pos_emb_ln_chart")
    download_buttons(
        "pos_emb_ln",
        fig=fig_ln,
        frame=pd.DataFrame({"dim": range(len(gamma)), "gamma": gamma, "beta": beta}),
        name="embedding_layernorm",
    )


# ----------------------------------------------------------------------------- images and audio
def patch_table_view(loaded, result: ExtractionResult) -> None:
    """An image model's patch position embeddings as similarity maps on the patch grid (ViT Fig. 7);
    an audio model, or an image model without a table, gets what it uses instead."""
    explainer(
        "What is this / references",
        f"""
A ViT adds one **position embedding** per patch (and one for [CLS]) to the patch embeddings before the first
layer. The map of a patch shows the cosine similarity of its position embedding to every other patch's, drawn
on the patch grid. Dosovitskiy et al. (Fig. 7) found that a trained ViT learns the 2-D layout by itself: a patch
is most similar to its neighbours and to the patches of its own row and column. A random-init model shows no
such structure. The table is read from the model's parameters (the one with a row per patch, plus prefix rows);
the grid and the prefix tokens from one traced forward pass through the checkpoint's processor.

Source: {SOURCES["vit"]}.
""",
    )
    layout = loaded.layout
    table = patch_table(loaded) if layout.modality == "image" else None
    if table is None:
        st.info(
            f"**{loaded.info.display_name}** has no table of learned position embeddings to draw: it uses "
            f"{position_scheme_note(loaded.encoder, layout)}."
            + (" The position probe tab works without one." if layout.modality == "image" else "")
        )
        return
    rows, cols = table.grid
    prefix = ", ".join(layout.prefix[: table.prefix_rows]) or "none"
    unplaced = [name for name in layout.prefix[table.prefix_rows :]]
    st.caption(
        f"`{table.path}`: {table.prefix_rows} prefix row(s) ({prefix}) and {rows}x{cols} patch rows"
        + (f"; {', '.join(unplaced)} get no position embedding" if unplaced else "")
        + "."
        + (
            f" The table is the model's own {rows}x{cols} grid; for this "
            f"{table.interpolated_to[0]}x{table.interpolated_to[1]}-patch input the model "
            "interpolates it."
            if table.interpolated_to
            else ""
        )
    )
    if table.is_zero:
        st.info(
            "Every patch row of this table is zero, so there is no similarity to draw (a fixed "
            "table that was never filled in, or a checkpoint saved without it)."
        )
        return
    cosines = patch_similarities(loaded)
    mode = st.radio(
        "Show",
        ["one patch", "every patch"],
        horizontal=True,
        key="pos_grid_mode",
        help="every patch: the small maps laid out on the grid, as in the ViT paper's Fig. 7",
    )
    if mode == "one patch":
        c1, c2 = st.columns(2)
        row = int(c1.number_input("Patch row", 0, rows - 1, rows // 2, key="pos_grid_row"))
        col = int(c2.number_input("Patch column", 0, cols - 1, cols // 2, key="pos_grid_col"))
        fig = plots.patch_similarity_map(cosines, row, col)
        frame = pd.DataFrame(cosines[row, col]).rename_axis("row").reset_index()
        name = f"patch_position_similarity_r{row}c{col}"
    else:
        fig = plots.patch_similarity_multiples(cosines)
        frame = pd.DataFrame(cosines.reshape(rows * cols, rows * cols))
        name = "patch_position_similarity_all"
    st.plotly_chart(fig, width="stretch", key="pos_grid_chart")
    download_buttons("pos_grid", fig=fig, frame=frame, name=name)


def grid_probe_view(result: ExtractionResult) -> None:
    """Probes for the patch row and column per hidden state (Luo et al.'s probe on the grid)."""
    explainer(
        "What is this / references",
        f"""
The **position probe** of Luo et al. (a bias-free linear softmax classifier on a token vector, trained per hidden
state on the token sample) asked twice: which **row** of the patch grid is this patch in, and which **column**?
Images (not patches) are split into training and held-out sets, so an image never appears on both sides. Prefix
tokens ([CLS], [DIST], registers) have no grid position and are left out. The baseline always predicts the most
frequent row (column) of the training patches. A ViT's position embeddings are added before the first layer,
so the emb state should be read best; how much survives the layers is the question.

Sources: {SOURCES["luo"]}; {SOURCES["vit"]}.
""",
    )
    show_notices(result)
    c1, c2, c3 = st.columns(3)
    test_fraction = c1.slider("Held-out images", 0.1, 0.5, 0.2, 0.05, key="pos_gprobe_test")
    seed = c2.number_input("Seed", 0, 10_000, 0, key="pos_gprobe_seed")
    iters = c3.select_slider("L-BFGS iterations", [10, 20, 30, 60, 100], 30, key="pos_gprobe_iter")
    try:
        settings = ProbeSettings(
            test_fraction=float(test_fraction), seed=int(seed), max_iter=int(iters)
        )
        probe = grid_probe(result, settings)
    except IsoscopeError as exc:
        st.error(str(exc))
        return
    rows, cols = probe.grid
    st.caption(
        f"{probe.row.n_train:,} training patches from {probe.row.n_train_texts} images · {probe.row.n_test:,} "
        f"held-out patches from {probe.row.n_test_texts} images · {rows} rows x {cols} columns"
    )
    fig = plots.grid_probe_lines(probe.row.state_names, probe.row, probe.column)
    st.plotly_chart(fig, width="stretch", key="pos_gprobe_chart")
    frame = probe.frame()
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons(
        "pos_gprobe", fig=fig, frame=frame, json_data=probe.to_dict(), name="patch_grid_probe"
    )


# ----------------------------------------------------------------------------- probe
def probe_tab() -> None:
    """Linear position probe per hidden state and its neuron contributions (Luo et al., section 4)."""
    loaded, result = load_or_stop()
    if result.input_kind == "image":
        grid_probe_view(result)
        return
    if result.input_kind == "audio":
        audio_probe_caption(result)
    probe_explainer()
    show_notices(result)
    try:
        probe = probe_result(result, probe_settings(result))
    except IsoscopeError as exc:
        st.error(str(exc))
    else:
        probe_accuracy_view(probe)
        probe_contribution_view(result, probe)


def audio_probe_caption(result: ExtractionResult) -> None:
    fps = result.model.get("frames_per_second")
    st.caption(
        "Audio: a frame's position is its index in the clip"
        + (f" ({1000 / fps:g} ms per frame)" if fps else "")
        + ", and clips (not frames) are split into training and held-out sets."
    )


def probe_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
A **position probe** (Luo et al., section 4) is a linear classifier without bias that reads a token vector and
predicts the token's absolute position. High held-out accuracy means position is linearly decodable from that
hidden state. The probe is trained per hidden state on the extraction's token sample; texts (not tokens) are split
into training and held-out sets, so a text never appears on both sides. Positions at or beyond *max position* are
left out (not merged), and special tokens are excluded by default ([CLS] always sits at position 0, so its
identity would give its position away).

**Neuron contribution** c(i) = mean over held-out tokens of |w_(y,i) · v_i|, the weight of the true position's
class times the activation (raw coordinates, no standardisation, so that outlier neurons keep their size).
Outlier dimensions of the hidden state are red. The baseline is always predicting the most frequent position.
Fit: multinomial logistic loss, small L2 penalty, L-BFGS with capped iterations.

Source: {SOURCES["luo"]}.
""",
    )


def probe_settings(result: ExtractionResult) -> ProbeSettings:
    """The probe's controls, as settings (which refuse a bad combination with an IsoscopeError)."""
    c1, c2, c3, c4, c5 = st.columns(5)
    max_pos = c1.number_input(
        "Max position",
        1,
        8192,
        int(min(64, result.settings.max_length)),
        key="pos_probe_maxpos",
        help="Tokens at this position or later are left out.",
    )
    test_fraction = c2.slider("Held-out texts", 0.1, 0.5, 0.2, 0.05, key="pos_probe_test")
    seed = c3.number_input("Seed", 0, 10_000, 0, key="pos_probe_seed")
    iters = c4.select_slider("L-BFGS iterations", [10, 20, 30, 60, 100], 30, key="pos_probe_iter")
    exclude_special = c5.checkbox("Exclude special tokens", True, key="pos_probe_special")
    return ProbeSettings(
        max_position=int(max_pos),
        test_fraction=float(test_fraction),
        seed=int(seed),
        max_iter=int(iters),
        exclude_special=bool(exclude_special),
    )


def probe_accuracy_view(probe: ProbeResult) -> None:
    st.caption(
        f"{probe.n_train:,} training tokens from {probe.n_train_texts} texts · {probe.n_test:,} held-out tokens "
        f"from {probe.n_test_texts} texts · {len(probe.classes)} positions"
    )
    fig_acc = plots.probe_accuracy_line(
        probe.state_names, probe.accuracy, probe.train_accuracy, probe.chance
    )
    st.plotly_chart(fig_acc, width="stretch", key="pos_probe_acc_chart")
    acc_frame = pd.DataFrame(
        {
            "state": probe.state_names,
            "held_out_accuracy": probe.accuracy,
            "train_accuracy": probe.train_accuracy,
            "baseline": probe.chance,
        }
    )
    download_buttons(
        "pos_probe_acc",
        fig=fig_acc,
        frame=acc_frame,
        json_data=probe.to_dict(),
        name="position_probe",
    )


def probe_contribution_view(result: ExtractionResult, probe: ProbeResult) -> None:
    """One state's neuron contributions (its outlier dims red), and all states' as a heatmap."""
    state_name = st.selectbox(
        "Hidden state for neuron contributions",
        probe.state_names,
        index=0,
        key="pos_probe_state",
    )
    s = probe.state_names.index(state_name)
    found = outliers_by_name(result)
    fig_c = plots.contribution_bars(
        probe.contributions[s], found[state_name], state_name=state_name
    )
    st.plotly_chart(fig_c, width="stretch", key="pos_probe_contrib_chart")
    table = contribution_table(probe, s, found[state_name])
    st.dataframe(table, hide_index=True, width="stretch")
    download_buttons(
        "pos_probe_contrib",
        fig=fig_c,
        frame=table,
        name=f"probe_contributions_{state_name}",
    )
    st.plotly_chart(
        plots.contribution_heatmap(probe.state_names, probe.contributions),
        width="stretch",
        key="pos_probe_heat_chart",
    )


# ----------------------------------------------------------------------------- TUPE
def tupe_tab() -> None:
    """TUPE split of the first layer's attention logits into word / position terms (Ke et al. 2021)."""
    chosen = text_extraction(
        "TUPE's decomposition",
        "splits the attention logits into terms of word and position embeddings",
    )
    if chosen is None:
        return
    loaded, result = chosen
    tupe_explainer()
    reason = supports_tupe(loaded)
    if reason is not None:
        if not rotary_note(loaded.info, "tupe"):
            st.info(f"Not available for this model: {reason}")
        return
    c1, c2, c3 = st.columns([1, 2, 1])
    n_texts = c1.slider(
        "Texts for the term shares",
        1,
        int(min(128, len(result.texts))),
        int(min(16, len(result.texts))),
        key="pos_tupe_texts",
    )
    try:
        summary = tupe_terms(loaded, result, n_texts)
    except IsoscopeError as exc:
        st.error(str(exc))
        return
    tupe_shares_view(summary)
    tupe_text_view(loaded, result, summary)


def tupe_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
With absolute position embeddings the first layer's input is LN(w + p + s) (word, position, segment). Using each
token's own mean and standard deviation, the LayerNorm splits **exactly** into a word part, a position part and a
remainder (segment, LN β). Projected through W_Q and W_K of each head, the attention logit (q_i·k_j)/√d_head splits
into **word→word, word→position, position→word, position→position** terms plus a remainder (segment, β and the
projection biases). TUPE (Ke et al., eq. 6) argues that the mixed word-position terms add little but noise and
that [CLS] should not be tied to position 0: its row and column are shown separately.

**Self-test:** the terms, computed in float64, must sum to the model's real pre-softmax logits, recomputed from the
outputs of the real query/key modules (forward hooks). The maximum absolute error is shown; expect ~1e-5 for
float32 models. GPT-2 (pre-LN) is split the same way through layer 1's `ln_1`.

Source: {SOURCES["tupe"]}.
""",
    )


def tupe_shares_view(summary: TupeSummary) -> None:
    """The self-test, and each term's share of the logits by region and by head."""
    m1, m2, m3 = st.columns(3)
    m1.metric("Self-test: max |sum of terms − real logits|", f"{summary.max_abs_error:.2e}")
    m2.metric("Largest |logit|", f"{summary.max_abs_logit:.2f}")
    m3.metric("LayerNorm split error", f"{summary.ln_error:.1e}")
    shares = {r: summary.term_share(r) for r in REGIONS}
    fig_share = plots.tupe_share_bars(shares)
    st.plotly_chart(fig_share, width="stretch", key="pos_tupe_share_chart")
    share_frame = pd.DataFrame(shares).T.rename_axis("region").reset_index()
    head_frame = (
        pd.DataFrame(summary.head_share(), columns=list(TERMS)).rename_axis("head").reset_index()
    )
    st.caption(
        f"Remainder (segment, β, biases): {summary.remainder_share():.1%} of the mean |term| over all five. "
        "Per-head shares:"
    )
    st.dataframe(head_frame, hide_index=True, width="stretch")
    download_buttons(
        "pos_tupe_share",
        fig=fig_share,
        frame=share_frame,
        json_data=summary.to_dict(),
        name="tupe_summary",
    )


def tupe_text_view(loaded: LoadedModel, result: ExtractionResult, summary: TupeSummary) -> None:
    """One text's terms for one head, beside its real logits."""
    max_length = int(result.settings.max_length)
    texts = list(result.texts[:50])
    t1, t2 = st.columns([3, 1])
    text_index = t1.selectbox(
        "Text",
        range(len(texts)),
        format_func=lambda i: f"{i}: {texts[i][:90]}",
        key="pos_tupe_text",
    )
    head = t2.number_input("Head", 0, summary.num_heads - 1, 0, key="pos_tupe_head")
    one = decompose_text(loaded, texts[text_index], max_length)
    fig_heat = plots.tupe_heatmaps(one.terms, one.real, int(head), one.tokens)
    st.plotly_chart(fig_heat, width="stretch", key="pos_tupe_heat_chart")
    st.caption(f"This text: max |sum − real| = {one.max_abs_error:.2e}.")
    download_buttons("pos_tupe_heat", fig=fig_heat, name=f"tupe_text{text_index}_head{int(head)}")


# ----------------------------------------------------------------------------- variance lab
def variance_lab_tab() -> None:
    """Attention-output variance vs position in random NoPE models, and on the selected model (Chi et al.)."""
    variance_lab_explainer()
    try:
        settings, contrast = variance_lab_settings()
        masks = (True, False) if contrast else (True,)
        curves_pair = variance_lab_pair(settings, masks)
        causal = curves_pair[0]
        bidir = curves_pair[1] if contrast else None
    except IsoscopeError as exc:
        st.error(str(exc))
    else:
        random_variance_view(causal, bidir)

    st.subheader("The same measurement on the selected model")
    if st.checkbox("Measure the sidebar's model on the corpus", False, key="pos_var_model"):
        model_variance_view()


def variance_lab_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
A causal Transformer **without any position embeddings** still knows where a token is (Chi et al.). At random
initialisation queries and keys are tiny, so attention is nearly uniform: the attention output at position m is the
average of m independent value vectors, and its variance over features shrinks like **1/m**:
Var[o_m] ≈ d·σ_o²·d·σ²/m, with σ the std of W_V and σ_o the std of the output projection (measured from the model;
HF GPT-2 draws c_proj with std init_std/√(2·layers)). The next layer can read position from that variance. With a
**bidirectional** mask every position averages all T tokens: the curve is flat.

Here: random, frozen, pre-LN GPT-2 blocks with the position table zeroed, random inputs (random token ids through
the random embedding, or Gaussian input embeddings), several seeds (band = ±1 std). The slope is a least-squares fit
of log variance on log position. Deeper layers shrink more slowly (their inputs already mix positions).

Source: {SOURCES["chi"]}.
""",
    )


def variance_lab_settings() -> tuple[NopeSettings, bool]:
    """The random models' controls, as settings (which refuse a bad combination with an
    IsoscopeError), and whether to add the bidirectional contrast."""
    c = st.columns(5)
    width = c[0].select_slider("Width d", [64, 128, 256, 512], 256, key="pos_var_width")
    layers = c[1].slider("Layers", 1, 12, 4, key="pos_var_layers")
    heads = c[2].number_input("Heads", 1, 64, 4, key="pos_var_heads")
    seq_len = c[3].select_slider(
        "Sequence length", [64, 128, 256, 512, 1024, 2048], 256, key="pos_var_seq"
    )
    seeds = c[4].slider("Seeds", 1, 10, 3, key="pos_var_seeds")
    c = st.columns(4)
    init_std = c[0].select_slider(
        "Init std", [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2], 0.02, key="pos_var_std"
    )
    inputs = c[1].radio(
        "Inputs",
        ["tokens", "gaussian"],
        key="pos_var_inputs",
        horizontal=True,
        help="tokens: random ids through the random embedding; gaussian: random input embeddings",
    )
    fit_from = c[2].number_input("Fit from position", 1, 1024, 4, key="pos_var_fit")
    contrast = c[3].checkbox("Bidirectional contrast", True, key="pos_var_contrast")
    settings = NopeSettings(
        d_model=int(width),
        layers=int(layers),
        heads=int(heads),
        seq_len=int(seq_len),
        seeds=int(seeds),
        init_std=float(init_std),
        inputs=str(inputs),
        fit_from=int(fit_from),
    )
    return settings, bool(contrast)


def random_variance_view(causal: VarianceCurves, bidir: VarianceCurves | None) -> None:
    """The random models' variance curves (causal, and the bidirectional contrast) and slopes."""
    st.caption(
        f"{causal.description} · {causal.seconds:.1f} s · measured σ = {causal.weight_stds['sigma_value']:.4f}, "
        f"σ_o = {causal.weight_stds['sigma_o']:.4f}"
    )
    left, right = st.columns(2)
    with left:
        fig_c = plots.variance_plot(
            causal, "attn", title="Causal: attention-output variance vs position"
        )
        st.plotly_chart(fig_c, width="stretch", key="pos_var_causal_chart")
        download_buttons(
            "pos_var_causal",
            fig=fig_c,
            frame=causal.frame(),
            json_data=causal.to_dict(),
            name="nope_variance_causal",
        )
    with right:
        if bidir is not None:
            fig_b = plots.variance_plot(
                bidir, "attn", title="Bidirectional: attention-output variance vs position"
            )
            st.plotly_chart(fig_b, width="stretch", key="pos_var_bidir_chart")
            download_buttons(
                "pos_var_bidir",
                fig=fig_b,
                frame=bidir.frame(),
                name="nope_variance_bidirectional",
            )
        else:
            fig_r = plots.variance_plot(causal, "resid")
            st.plotly_chart(fig_r, width="stretch", key="pos_var_resid_chart")
    slope_rows = pd.DataFrame(variance_slope_table(causal, bidir))
    st.dataframe(slope_rows, hide_index=True, width="stretch")
    st.caption(
        f"Slopes fitted over positions {causal.fit_range[0]}–{causal.fit_range[1]}; "
        "theory: −1 for layer 1 (causal), 0 (bidirectional)."
    )
    if bidir is not None:
        st.plotly_chart(
            plots.variance_plot(causal, "resid"),
            width="stretch",
            key="pos_var_resid_chart2",
        )


def model_variance_view() -> None:
    """The variance measurement on the sidebar's model and corpus."""
    chosen = text_extraction(
        "Measuring the selected model",
        "runs the corpus texts through the model and reads its attention outputs",
    )
    if chosen is None:
        return
    loaded, result = chosen
    try:
        curves = model_variance(loaded, result)
    except IsoscopeError as exc:
        st.error(str(exc))
    else:
        if not loaded.info.is_causal:
            st.info(
                f"{loaded.info.display_name} is bidirectional: every "
                "token attends to the whole text, so expect no 1/m law."
            )
        if loaded.info.position_embedding.startswith("absolute"):
            st.caption(
                "This model also has position embeddings, so variance is not its only position signal."
            )
        fig_m = plots.variance_plot(
            curves,
            "attn",
            show_seeds=False,
            title=f"{curves.description}: attention-output variance",
        )
        st.plotly_chart(fig_m, width="stretch", key="pos_var_model_chart")
        download_buttons(
            "pos_var_model", fig=fig_m, frame=curves.frame(), name="variance_selected_model"
        )


# ----------------------------------------------------------------------------- queries and keys
def queries_keys_tab() -> None:
    """Mean query / key norms, their cosine and attention entropy per head, trained vs random (Godey et al.)."""
    chosen = text_extraction(
        "The queries & keys view",
        "runs the corpus texts again through the model's attention",
    )
    if chosen is None:
        return
    loaded, result = chosen
    queries_keys_explainer()
    rotary = loaded.info.position_embedding.startswith("rotary")
    rotation = rotation_control() if rotary else "applied"
    c1, c2, c3 = st.columns(3)
    n_texts = c1.slider(
        "Texts",
        4,
        int(max(4, min(320, len(result.texts)))),
        int(min(64, len(result.texts))),
        key="pos_qk_texts",
    )
    metric = c2.selectbox("Metric", list(METRICS), format_func=METRICS.get, key="pos_qk_metric")
    with_random = c3.checkbox("Compare with random init", True, key="pos_qk_random")
    max_length = int(min(64, result.settings.max_length))
    texts = result.texts[:n_texts]
    try:
        trained = queries_keys(loaded, result, n_texts, max_length, False, rotation)
        stats = [trained]
        if with_random:
            stats.append(queries_keys(loaded, result, n_texts, max_length, True, rotation))
    except IsoscopeError as exc:
        st.error(str(exc))
    else:
        queries_keys_view(stats, metric, rotary, len(texts), max_length)


def queries_keys_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
Godey et al. link anisotropy to the attention mechanism: during training the **mean query** and **mean key** of a head
move away from the origin, and their directions become aligned (or opposed), so all queries share a common
component of their dot products with all keys. Shown per layer and query head, over all non-padding tokens: the norms
of the mean query and mean key, their cosine, and the attention entropy (raw, and divided by log(number of attendable
keys): 1 = uniform). Queries and keys are read as the attention uses them (projection biases, q/k norms and the
rotary embedding included), and the entropy comes from the model's own attention weights under its own mask
(causal, and a sliding window where the config has one). A random-init copy of the same architecture is the contrast.

**Grouped-query attention**: H query heads share G key heads, and query head h attends with key head
floor(h / (H / G)); each column then reads `h·kv`, and every statistic is the query head's against its own key head.

**Rotary positions** (Su et al.): q_m = R(m) W_q x_m, so the mean of the rotated queries mixes positions, while before
rotation it is the projection's own drift. The rotation toggle shows either; the figure title says which.

Sources: {SOURCES["godey"]}; {SOURCES["rope"]}.
""",
    )


def rotation_control() -> str:
    """Queries and keys with the rotary embedding applied, or from before it."""
    return st.radio(
        "Rotary embedding",
        ROTATIONS,
        format_func={
            "applied": "applied (as the attention uses them)",
            "before": "before rotation",
        }.get,
        horizontal=True,
        key="pos_qk_rotation",
    )


def queries_keys_view(
    stats: list[QKStats], metric: str, rotary: bool, n_texts: int, max_length: int
) -> None:
    """Heatmaps and layer lines of one metric (trained, and random init when asked), and the caption."""
    trained = stats[0]
    title = METRICS[metric] + (f" · rotary {trained.rotation}" if rotary else "")
    fig_h = plots.qk_heatmaps(stats, metric, title)
    st.plotly_chart(fig_h, width="stretch", key="pos_qk_heat_chart")
    fig_l = plots.qk_layer_lines(stats, metric, METRICS[metric])
    st.plotly_chart(fig_l, width="stretch", key="pos_qk_line_chart")
    frame = pd.concat([s.frame() for s in stats], ignore_index=True)
    download_buttons(
        "pos_qk",
        fig=fig_h,
        frame=frame,
        json_data=[s.to_dict() for s in stats],
        name="queries_keys",
    )
    groups = trained.num_kv_heads
    heads = trained.kv_head.size
    st.caption(
        f"{trained.num_tokens:,} tokens from {n_texts} texts (max {max_length} tokens each). "
        + (
            f"{heads} query heads share {groups} key heads ({heads // groups} per key head). "
            if groups < heads
            else ""
        )
        + f"Queries and keys read at {trained.capture}; rotation: {trained.rotation}; "
        f"entropy under {trained.mask}."
    )


# one view per label of TABS, in the same order
TAB_VIEWS = (position_embeddings_tab, probe_tab, tupe_tab, variance_lab_tab, queries_keys_tab)
