"""The Overview page (pages/overview.py): model card, corpus summary, outlier dims and anisotropy
per hidden state, and the first position's share of both."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import streamlit as st

from isoscope.analysis.massive.first_position import (
    FirstPositionContrast,
    first_position_contrast,
)
from isoscope.analysis.summaries import first_position_gap
from isoscope.engine.budget.page_budget import FirstLook
from isoscope.engine.budget.throughput import record_statistics, speed_measured, token_counts
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.serve import firstlook
from isoscope.engine.store.cache import ResultCache
from isoscope.plots.massive import first_position_figure, first_position_frame
from isoscope.plots.overview import anisotropy_line, model_card_rows
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer, show_notices
from isoscope.ui.frame.selection import get_selection, run_whole_corpus, whole_corpus_asked
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.saved import open_saved
from isoscope.ui.work.cached import cached, heavy
from isoscope.ui.work.corpora import get_corpus
from isoscope.ui.work.extraction import get_extraction, is_computed, log_extraction
from isoscope.ui.work.models import get_model
from isoscope.ui.work.results import anisotropy, outlier_dims_by_state


@cached
def corpus_token_counts(loaded: LoadedModel, corpus: Corpus, max_length: int) -> list[int]:
    """Tokens per text of ``corpus`` for ``loaded`` (the first look's estimate)."""
    return token_counts(loaded.tokenizer, corpus.texts, max_length)


def first_look_plan() -> FirstLook | None:
    """The Overview's first look at the selection (:func:`isoscope.engine.serve.firstlook.plan`),
    or None: when the whole corpus is estimated to fit the budget, is already computed (memory or
    disk: nothing is computed twice), was asked for (the note's button), or a saved analysis is
    open. On a device with no speed recorded yet, the first look is measured on its own first
    batch and extracted here (:func:`measured_first_look`)."""
    sel = get_selection()
    if open_saved() is not None or whole_corpus_asked(sel):
        return None
    try:
        loaded, corpus = get_model(sel), get_corpus(sel)
    except IsoscopeError:
        return None  # the extraction shows the error
    if getattr(corpus, "kind", "text") != "text" or is_computed(loaded, corpus, sel.settings):
        return None
    counts = corpus_token_counts(loaded, corpus, sel.settings.max_length)
    root = ResultCache().root
    plan = firstlook.plan(loaded, corpus, counts, sel.settings, root)
    if plan is not None or speed_measured(loaded, root):
        return plan
    return measured_first_look(loaded, corpus, sel.settings)


@heavy(
    lambda loaded, corpus, settings: (
        f"First look at {literal(loaded.info.display_name)}: measuring this device's speed on the first "
        "batch, then the texts that fit"
    ),
    unit="texts",
)
def measured_first_look(
    loaded: LoadedModel, corpus: Corpus, settings: ExtractionSettings, *, progress
) -> FirstLook | None:
    """:func:`isoscope.engine.serve.firstlook.measured_first_look` of the selection into the disk cache,
    where the page's extraction then finds it (so the extraction is logged here)."""
    log_extraction(loaded, corpus, settings)
    counts = token_counts(loaded.tokenizer, corpus.texts, settings.max_length)
    return firstlook.measured_first_look(loaded, corpus, counts, settings, ResultCache(), progress)


def statistics_clock(result: ExtractionResult) -> Callable[[], None]:
    """Starts timing the page's statistics on ``result``; the returned call keeps their seconds
    per sampled token x hidden state x dim on this machine
    (:func:`isoscope.engine.budget.throughput.record_statistics`), which the next first look budgets. A
    rerun served from the caches is too short to be kept."""
    started = time.perf_counter()

    def stop() -> None:
        seconds = time.perf_counter() - started
        units = result.num_states * result.hidden_size
        record_statistics(ResultCache().root, units, len(result.sample_index), seconds)

    return stop


def first_look_note(plan: FirstLook | None) -> None:
    """Says plainly that the page shows a first look, with the one click that runs everything."""
    if plan is None:
        return
    st.info(
        f"This page is a **{plan.describe()}**: the first {plan.texts:,} texts, sized so that "
        f"this page, the model's load included, takes {plan.budget_s:.0f} s or less; every "
        "figure below comes from them. Run the whole corpus for the full picture.",
        icon=":material/timer:",
    )
    if st.button("Run the whole corpus", key="overview_whole_corpus", type="primary"):
        run_whole_corpus()
        st.rerun()


def corpus_caption(result: ExtractionResult) -> None:
    """The corpus a figure came from, under the figure."""
    st.caption(f"Corpus: {literal(result.corpus_name)} ({result.num_texts:,} texts)")


def cards(result: ExtractionResult) -> None:
    """The model card beside the corpus summary."""
    left, right = st.columns([1, 1])
    with left:
        st.subheader("Model")
        st.table(model_card_rows(result.model))
    with right:
        st.subheader("Corpus")
        st.metric("Texts", f"{result.num_texts:,}")
        st.metric("Tokens analysed", f"{result.num_tokens:,}")
        st.caption(
            f"{literal(result.corpus_name)} · max {result.settings.max_length} tokens per text · "
            f"special tokens {'excluded' if result.settings.exclude_special else 'included'} · "
            f"token sample {len(result.sample_index):,} of {result.num_tokens:,} · extraction {result.seconds:.1f} s"
        )
        show_notices(result)


def outliers_and_anisotropy(result: ExtractionResult) -> None:
    """Outlier dims and anisotropy per hidden state, with the references."""
    aniso = anisotropy(result)
    outliers = outlier_dims_by_state(result)
    st.subheader("Outlier dimensions per hidden state")
    rows = [
        {
            "hidden state": name,
            "outlier dims (z-score or extreme-index)": ", ".join(map(str, outliers[s])) or "—",
            "anisotropy": round(float(aniso[s]), 3),
        }
        for s, name in enumerate(result.state_names)
    ]
    st.dataframe(rows, hide_index=True, width="stretch")
    st.plotly_chart(
        anisotropy_line(result.state_names, aniso), width="stretch", key="overview_aniso"
    )
    corpus_caption(result)
    explainer(
        "What is this / references",
        """
**Hidden states** are numbered `emb` (the embedding output, index 0) and `1 … L` (the output of each layer).

**Outlier dimensions** are flagged when their mean lies more than 3 standard deviations from the mean of
all dimensions' means (Timkey & van Schijndel 2021, *All Bark and No Bite*, arXiv 2109.04404) or when they
hold the minimum or maximum of at least half of all token vectors (Luo, Kulmizev & Mao 2021, *Positional
Artefacts Propagate Through Masked Language Model Embeddings*, arXiv 2011.04393). The *Outlier dimensions*
page shows all four criteria with their thresholds.

**Anisotropy** is the mean cosine similarity of 10,000 random pairs of token vectors from different texts
(Ethayarajh 2019, arXiv 1909.00512): 0 for directions spread evenly, near 1 when all vectors point one way.
""",
    )


@cached
def first_position(result: ExtractionResult) -> FirstPositionContrast:
    """Anisotropy and |mean| per hidden state with and without the first position."""
    return first_position_contrast(result)


def first_position_section(result: ExtractionResult, plan: FirstLook | None = None) -> None:
    """Overview section: anisotropy and the largest |mean| with and without the first position.

    Needs an extraction that includes position 0: the shown one, or (when the sidebar excludes
    it) the same selection with the first position included, run once on request (on the first
    look's texts when the page shows a first look).
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
            _, source = get_extraction(other, corpus=plan.corpus if plan else None)
        except IsoscopeError as exc:
            st.error(message(exc))
            return
    try:
        contrast = first_position(source)
    except IsoscopeError as exc:
        st.info(message(exc))
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
    corpus_caption(source)
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
