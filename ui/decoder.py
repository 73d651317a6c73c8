"""Cached decoder analyses for the "Massive activations & sinks" page (one pass per setting)."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backend.analysis.decoder.massive import (
    DecoderScan,
    TextMagnitudes,
    first_position_contrast,
    scan_decoder,
    text_magnitudes,
)
from backend.analysis.geometry.summaries import first_position_gap
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import ExtractionResult
from backend.plots.decoder import first_position_figure, first_position_frame
from ui.common import (
    download_buttons,
    explainer,
    get_corpus,
    get_extraction,
    get_model,
    get_selection,
    memo,
    memo_heavy,
    result_key,
)


def get_scan(n_texts: int, max_length: int) -> DecoderScan:
    """Massive activations, sinks and int8 features of the selected model on the first
    ``n_texts`` texts of the selected corpus (memoised per model, corpus and settings)."""
    loaded = get_model()
    corpus = get_corpus()
    texts = corpus.texts[:n_texts]

    def compute(progress) -> DecoderScan:
        return scan_decoder(loaded, texts, max_length=max_length, progress=progress)

    key = (loaded.fingerprint, corpus.sha, n_texts, max_length)
    label = f"Scanning {loaded.info.display_name}:"
    return memo_heavy("massive.scan", key, label, compute, "texts")


def get_text_view(text: str, max_length: int) -> TextMagnitudes:
    """|h| of every hidden state, position and dim of one text (memoised)."""
    loaded = get_model()
    return memo(
        "massive.text",
        (loaded.fingerprint, text, max_length),
        lambda: text_magnitudes(loaded, text, max_length),
    )


def first_position_section(result: ExtractionResult) -> None:
    """Overview section: anisotropy and the largest |mean| with and without the first position.

    Needs an extraction that includes position 0: the shown one, or (when the sidebar excludes
    it) the same selection with the first position included, run once on request.
    """
    st.subheader("The first position")
    source = result
    if result.settings.exclude_first:
        sel = get_selection()
        other = replace(sel, settings=replace(sel.settings, exclude_first=False))
        if st.session_state.get("overview_first_position") != other:
            st.caption(
                "This analysis leaves the first position of every text out (sidebar). To see how "
                "much it changes the picture, run the same corpus once with it included."
            )
            if not st.button("Compare with the first position included", key="overview_first"):
                return
            st.session_state["overview_first_position"] = other
        try:
            _, source = get_extraction(other)
        except IsoscopeError as exc:
            st.error(str(exc))
            return
    try:
        contrast = memo(
            "massive.first_position", (result_key(source),), lambda: first_position_contrast(source)
        )
    except IsoscopeError as exc:
        st.info(str(exc))
        return
    gap = first_position_gap(contrast)
    st.markdown(
        f"The first position is {contrast.n_first:,} of the {contrast.n_sample:,} sampled tokens. "
        f"It changes the anisotropy most at hidden state **{gap.state_name}**: "
        f"**{gap.anisotropy_with:.3f}** with it, **{gap.anisotropy_without:.3f}** "
        f"without; the largest |mean| of a dim there is **{gap.mean_ratio:.1f} x** larger with it."
    )
    fig = first_position_figure(contrast)
    st.plotly_chart(fig, width="stretch", key="overview_first_position_chart")
    download_buttons(
        "overview_first", fig=fig, frame=first_position_frame(contrast), name="first_position"
    )
    explainer(
        "Why the first position",
        """
In decoder LLMs the first token carries **massive activations**: a few values of |h| in the thousands in
fixed dims (Sun et al. 2024, arXiv 2402.17762), and most heads attend to it as an **attention sink** (Xiao
et al. 2023, arXiv 2309.17453). Averaged over a corpus, one such token per text still dominates the mean of
its dims and the cosines between tokens, so outlier heatmaps, anisotropy and projections mostly describe
that one token. Exclude the first position (sidebar; on by default for causal models) to see the
geometry of ordinary tokens. In BERT-style encoders the first position is [CLS]. Both curves use the same
different-text pairs from the token sample, minus the pairs that touch a first-position token; see the
*Massive activations & sinks* page for the activations themselves.
""",
    )


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
