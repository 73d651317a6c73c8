"""The dimension card's sections, drawn the same way wherever a card shows: the "What is this
dimension?" page (one dimension or direction) and the SAE page (one feature's pre-activation).
Each takes a computed :class:`~isoscope.analysis.dimension.DimensionCard` and a ``key`` prefix
that keeps two cards' widgets apart; the card itself is computed by the page's own cached call."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.dimension import DimensionCard
from isoscope.plots.dimension import (
    STATISTICS,
    ablation_frame,
    by_kind_frame,
    by_position_frame,
    by_state_figure,
    contributions_figure,
    contributions_frame,
    histogram_figure,
    logit_frame,
    qk_share_figure,
    readers_frame,
    top_tokens_frame,
)
from isoscope.ui.frame.literal import message
from isoscope.ui.sharing.downloads import download_buttons


def headline(card: DimensionCard, key: str = "dim", file_name: str = "dimension_card.json") -> None:
    for note in card.notes:
        st.caption(f"ℹ️ {message(note)}")
    state = card.state_names[card.state]
    writer = max(card.contributions, key=lambda r: abs(r["mean"]), default=None)
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(f"Mean of {card.title} at state {state}", f"{float(card.values.mean()):.4g}")
    m2.metric("Largest |value|", f"{card.value_scale:.4g}")
    if writer is not None:
        m3.metric("Largest writer (mean)", f"layer {writer['layer']} {writer['component']}")
    m4.metric(
        "Sum check", f"{card.sum_check:.1e}",
        help="The largest difference, over every token, between the sum of the parts and the value.",
    )  # fmt: skip
    st.caption(
        f"{card.model} · {card.n_texts:,} texts · {card.n_tokens:,} tokens · {card.seconds:.1f} s"
    )
    download_buttons(f"{key}_card", json_data=card.to_dict(), name=file_name.removesuffix(".json"))


def where_it_shows(card: DimensionCard, key: str = "dim") -> None:
    st.subheader("Where it shows")
    st.plotly_chart(by_state_figure(card), key=f"{key}_by_state")
    c1, c2 = st.columns(2)
    c1.plotly_chart(histogram_figure(card), key=f"{key}_hist")
    c2.dataframe(by_kind_frame(card), hide_index=True)
    c2.dataframe(by_position_frame(card), hide_index=True)
    st.dataframe(top_tokens_frame(card), hide_index=True)


def what_writes_it(card: DimensionCard, key: str = "dim") -> None:
    st.subheader("What writes it")
    statistic = st.radio(
        "Contribution", list(STATISTICS), format_func=STATISTICS.get, horizontal=True,
        key=f"{key}_statistic",
    )  # fmt: skip
    st.plotly_chart(contributions_figure(card, statistic), key=f"{key}_contributions")
    st.caption(
        f"The parts sum to the value on every token: largest difference {card.sum_check:.1e} "
        f"(values up to {card.value_scale:.3g})."
    )
    st.dataframe(contributions_frame(card), hide_index=True)


def what_reads_it(card: DimensionCard, key: str = "dim") -> None:
    st.subheader("What reads it")
    st.dataframe(readers_frame(card), hide_index=True)
    qk = qk_share_figure(card)
    if qk is not None:
        st.markdown("**Share of each head's query-key logit it carries** (before rotary positions)")
        st.plotly_chart(qk, key=f"{key}_qk")


def what_it_does(card: DimensionCard) -> None:
    st.subheader("What it does")
    logits = logit_frame(card)
    if logits is not None:
        st.markdown("**Direct effect on the logits** (through the final norm and the unembedding)")
        st.dataframe(logits, hide_index=True)
    ablation = ablation_frame(card)
    if ablation is None:
        st.caption("No ablation (texts for the ablation: 0).")
    else:
        st.markdown(
            f"**Ablation** at state {card.state_names[card.state]} over the first "
            f"{card.ablation['texts']} texts ({card.ablation['tokens']:,} tokens; "
            f"{card.ablation['metric']})"
        )
        st.dataframe(ablation, hide_index=True)


def geometry(card: DimensionCard) -> None:
    st.subheader("Its share of the geometry")
    g = card.geometry
    c1, c2, c3, c4 = st.columns(4)
    share = g["cosine_share"]
    c1.metric("Share of the mean cosine", "—" if share is None else f"{share:.1%}")
    var = g["variance_share"]
    c2.metric("Share of the variance", "—" if var is None else f"{var:.1%}")
    c3.metric("Massive activation", "yes" if g["massive"] else "no")
    c4.metric("Tokens with |value| ≥ 6 (int8 rule)", f"{g['int8_token_share']:.1%}")
    figures = {"mean cosine": "mean_cosine", "max |value|": "max_abs", "median |h| of the state":
               "median_abs_of_state"}  # fmt: skip
    st.caption(
        " · ".join(
            f"{label} {'—' if g.get(k) is None else format(g[k], '.3g')}"
            for label, k in figures.items()
        )
    )


def sections(card: DimensionCard, key: str = "dim", file_name: str = "dimension_card.json") -> None:
    """Every section of the card, in the page's order."""
    headline(card, key, file_name)
    where_it_shows(card, key)
    what_writes_it(card, key)
    what_reads_it(card, key)
    what_it_does(card)
    geometry(card)
