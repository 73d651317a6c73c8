"""The TUPE decomposition tab: the first layer's attention logits split into word and position
terms (Ke, He & Liu 2021), with the self-test against the real logits."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from isoscope.analysis.positional import tupe as positional_tupe
from isoscope.analysis.positional.params import TUPE_TEXTS
from isoscope.analysis.positional.tupe import (
    REGIONS,
    TERMS,
    TupeSummary,
    TupeText,
    supports_tupe,
    tupe_summary,
)
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.plots import positional as plots
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.positional.shared import SOURCES, rotary_note, text_extraction
from isoscope.ui.work.cached import cached, heavy


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
            st.info(f"Not available for this model: {literal(reason)}")
        return
    c1, c2, c3 = st.columns([1, 2, 1])
    n_texts = c1.slider(
        "Texts for the term shares",
        1,
        int(min(128, len(result.texts))),
        int(min(TUPE_TEXTS.default, len(result.texts))),
        key="pos_tupe_texts",
    )
    try:
        summary = tupe_terms(loaded, result, n_texts)
    except IsoscopeError as exc:
        st.error(message(exc))
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
