"""The Variance lab (NoPE) tab: attention-output variance vs position in random models without
position embeddings, and on the selected model (Chi et al. 2023)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from isoscope.analysis.positional import nope
from isoscope.analysis.positional.nope import NopeSettings, VarianceCurves, variance_on_model
from isoscope.analysis.positional.params import (
    NOPE_D_MODEL,
    NOPE_FIT_FROM,
    NOPE_HEADS,
    NOPE_INIT_STD,
    NOPE_LAYERS,
    NOPE_SEEDS,
    NOPE_SEQ_LEN,
)
from isoscope.analysis.positional.summaries import variance_slope_table
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.plots import positional as plots
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.views.positional.shared import SOURCES, text_extraction
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import choice_slider, interval_number
from isoscope.ui.work.cached import heavy


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
        st.error(message(exc))
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
    width = choice_slider(c[0], "Width d", NOPE_D_MODEL, "pos_var_width")
    layers = c[1].slider("Layers", 1, 12, NOPE_LAYERS.default, key="pos_var_layers")
    heads = interval_number(c[2], "Heads", NOPE_HEADS, "pos_var_heads", help=None)
    seq_len = choice_slider(c[3], "Sequence length", NOPE_SEQ_LEN, "pos_var_seq")
    seeds = c[4].slider("Seeds", 1, 10, NOPE_SEEDS.default, key="pos_var_seeds")
    c = st.columns(4)
    init_std = choice_slider(c[0], "Init std", NOPE_INIT_STD, "pos_var_std")
    inputs = c[1].radio(
        "Inputs",
        ["tokens", "gaussian"],
        key="pos_var_inputs",
        horizontal=True,
        help="tokens: random ids through the random embedding; gaussian: random input embeddings",
    )
    fit_from = c[2].number_input(
        "Fit from position", 1, 1024, NOPE_FIT_FROM.default, key="pos_var_fit"
    )
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
        chart_with_downloads(
            fig_c,
            key="pos_var_causal_chart",
            downloads="pos_var_causal",
            frame=causal.frame(),
            json_data=causal.to_dict(),
            name="nope_variance_causal",
        )
    with right:
        if bidir is not None:
            fig_b = plots.variance_plot(
                bidir, "attn", title="Bidirectional: attention-output variance vs position"
            )
            chart_with_downloads(
                fig_b,
                key="pos_var_bidir_chart",
                downloads="pos_var_bidir",
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
        st.error(message(exc))
    else:
        if not loaded.info.is_causal:
            st.info(
                f"{literal(loaded.info.display_name)} is bidirectional: every "
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
        chart_with_downloads(
            fig_m,
            key="pos_var_model_chart",
            downloads="pos_var_model",
            frame=curves.frame(),
            name="variance_selected_model",
        )
