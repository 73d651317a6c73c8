"""The Anisotropy page (pages/anisotropy.py): random-pair cosine histograms, isotropy metrics by
layer (raw vs post-processed vs random init), the dimensions that carry the cosine, and the
mean-cosine vs IsoScore contrast. The interactive sections are fragments: their controls rerun
only their own chart."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.anisotropy import (
    HISTOGRAM_BINS,
    N_PAIRS,
    PAIR_SEED,
    StateIsotropy,
    by_state,
    why_no_anisotropy,
)
from isoscope.analysis.projections.postprocess import make_postprocessor
from isoscope.analysis.summaries import mean_shift_peak
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import random_like_source
from isoscope.plots.anisotropy import (
    contrast_frame,
    contribution_frame,
    cosine_contribution_figure,
    cosine_histogram_figure,
    histogram_frame,
    histogram_small_multiples,
    mean_shift_contrast_figure,
    metrics_by_layer_figure,
    metrics_frame,
)
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.selection import get_selection
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.links import state_index
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import PostChoice, postprocessing_controls
from isoscope.ui.work.cached import cached
from isoscope.ui.work.extraction import get_extraction
from isoscope.ui.work.results import outlier_dims_by_state

# ----------------------------------------------------------------------------- cached calls


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
    """:func:`isoscope.analysis.anisotropy.by_state` after the post-processing ``post`` with ``params``
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


@cached
def anisotropy_note(result: ExtractionResult) -> str | None:
    """Why anisotropy is blank for ``result`` (one text in its token sample), or None."""
    return why_no_anisotropy(result)


BINS = 100  # 0.02 wide over [-1, 1]


def explain() -> None:
    explainer(
        "What is this / how to read it / references",
        """
**Anisotropy** (Ethayarajh 2019) is the mean cosine similarity of random pairs of token vectors taken from
*different* texts: about 0 when directions are spread evenly, near 1 when all vectors point one way. Here
10,000 pairs are drawn once (seed 0) from the token sample and reused for every hidden state and every
post-processing, so all numbers are comparable. The histograms show the whole distribution, not just its mean.

**Self-similarity** is the mean cosine between a word's vectors in different texts; **intra-text similarity**
is the mean cosine between each token and its text's mean vector. Both are shown *adjusted*: minus the
layer's anisotropy, because in an anisotropic space everything is similar to everything (Ethayarajh 2019).
Recurring words are whole-word tokens (not special, not punctuation, not split into pieces) that occur in
at least two texts of the token sample.

**Which dimensions carry the cosine** (Timkey & van Schijndel 2021): cos(u, v) = Σᵢ uᵢvᵢ / (|u||v|), so
the mean cosine splits exactly into one expected contribution per dimension. In many models one or two
"rogue" dimensions carry most of it; in the bundled all-MiniLM-L6-v2, dimension 223 carries 35–65 % of the
mean cosine in hidden states 2–5. Clipping it (Luo et al. 2021) or standardising (Timkey's
recommendation) removes that share.

**IsoScore** (Rudman et al. 2022) measures how evenly the variance is spread over all directions, from the
eigenvalues of the covariance: 1 for an isotropic cloud, 0 when all points lie on a line. It ignores the
mean: moving every vector by the same offset changes the mean cosine a lot and IsoScore not at all (see
the last chart). A high mean cosine can come from one shared offset; a low IsoScore means few directions
carry the variance. They answer different questions.

**Trained vs random init** (Godey et al. 2023, 2024): the same architecture with freshly initialised
weights on the same texts. Godey et al. argue anisotropy is inherent to Transformers trained with
self-attention (it also appears in character-level, speech and vision Transformers; queries and keys
drift together to sharpen attention); Machina & Mercer (2024) counter that large Pythia models are
nearly isotropic, so it is not universal.

**Sources**
- Ethayarajh 2019, *How Contextual are Contextualized Word Representations?*, [arXiv 1909.00512](https://arxiv.org/abs/1909.00512)
- Godey, de la Clergerie & Sagot 2023, *Is Anisotropy Inherent to Transformers?*, [arXiv 2306.07656](https://arxiv.org/abs/2306.07656);
  Godey et al. 2024, *Anisotropy Is Inherent to Self-Attention in Transformers*, [arXiv 2401.12143](https://arxiv.org/abs/2401.12143)
- Machina & Mercer 2024, *Anisotropy is Not Inherent to Transformers* (NAACL 2024), counterpoint on Pythia models
- Timkey & van Schijndel 2021, *All Bark and No Bite*, [arXiv 2109.04404](https://arxiv.org/abs/2109.04404)
- Rudman, Gillman, Rayne & Eickhoff 2022, *IsoScore: Measuring the Uniformity of Embedding Space Utilization*, [arXiv 2108.07344](https://arxiv.org/abs/2108.07344)
- Post-processing: Luo, Kulmizev & Mao 2021 (clipping, [arXiv 2011.04393](https://arxiv.org/abs/2011.04393));
  Mu & Viswanath 2018
  (all-but-the-top, [arXiv 1702.01417](https://arxiv.org/abs/1702.01417)); Su et al. 2021 (whitening, [arXiv 2103.15316](https://arxiv.org/abs/2103.15316))
""",
    )


def controls(result: ExtractionResult) -> tuple[PostChoice | None, bool]:
    """The post-processing to compare with the raw vectors, and whether to add random init."""
    d = result.hidden_size
    st.subheader("Post-processing to compare with the raw vectors")
    c1, c2, c3 = st.columns([2, 2, 2])
    choice = postprocessing_controls("aniso", d, (c1, c2), include_none=True, default="clip")
    compare_random = c3.toggle(
        "Compare with random-init weights",
        key="aniso_random",
        help="Also run the same architecture with freshly initialised weights on the same texts "
        "(Godey et al.). The first time takes as long as the first extraction.",
    )
    return choice, compare_random


def series_or_stop(result: ExtractionResult, choice: PostChoice | None) -> dict[str, StateIsotropy]:
    """The raw vectors' isotropy and the post-processed one's (or an error and ``st.stop()``)."""
    if choice is None:
        st.stop()
    try:
        raw = isotropy(result, bins=BINS, name="raw")
        processed = (
            None
            if choice.name == "none"
            else isotropy(result, choice.name, choice.params, bins=BINS, name=choice.name)
        )
    except IsoscopeError as exc:
        st.error(f"**Cannot apply this post-processing.** {message(exc)}")
        st.stop()

    series = {"raw": raw} | ({"processed": processed} if processed is not None else {})
    st.caption(
        f"{raw.n_pairs:,} random pairs of tokens from different texts · token sample {len(result.sample_index):,} of "
        f"{result.num_tokens:,} tokens · {raw.n_recurring_words:,} recurring words for self-similarity · "
        f"processed = {choice.label}"
    )

    blank = anisotropy_note(result)
    if blank:
        st.info(blank[0].upper() + blank[1:] + ".", icon=":material/info:")
    if any(iso.isoscore.size and all(v != v for v in iso.isoscore) for iso in series.values()):
        st.caption(
            f"IsoScore is blank where the token sample ({len(result.sample_index):,}) has fewer points than "
            "dimensions; raise the token sample in the sidebar."
        )
    return series


def random_init_series(result: ExtractionResult, compare_random: bool) -> dict[str, StateIsotropy]:
    """The same architecture with fresh weights on the same texts (Godey et al.), when asked."""
    random_series: dict[str, StateIsotropy] = {}
    if compare_random:
        source = get_selection().model_source
        try:
            _, random_result = get_extraction(source=random_like_source(source))
            random_series["random init"] = isotropy(random_result, bins=BINS, name="random init")
        except IsoscopeError as exc:
            st.error(f"**Cannot build the random-init comparison.** {message(exc)}")
        if result.model.get("random_init"):
            st.info(
                "The selected model already has random weights; the comparison uses another random initialisation."
            )
    return random_series


@fragment
def histogram_section(result: ExtractionResult, hist_series: dict[str, StateIsotropy]) -> None:
    """Cosine histograms of one hidden state, or small multiples of all of them."""
    names = result.state_names
    st.subheader("Cosine similarity of random token pairs")
    h1, h2 = st.columns([3, 1])
    default_state = max(1, result.num_layers // 2) if result.num_layers else 0
    view = h2.radio(
        "View", ["one hidden state", "all hidden states"], key="aniso_hist_view", horizontal=False
    )
    state_name = h1.select_slider(
        "Hidden state",
        names,
        value=names[state_index(names, default_state, "aniso_layer", by_name=True)],
        key="aniso_layer",
        disabled=view != "one hidden state",
    )
    if view == "one hidden state":
        fig_hist = cosine_histogram_figure(hist_series, names.index(state_name))
    else:
        fig_hist = histogram_small_multiples(hist_series)
    chart_with_downloads(
        fig_hist,
        key="aniso_hist_chart",
        downloads="aniso_hist",
        frame=histogram_frame(hist_series),
        name="cosine_histograms",
    )


def metrics_section(
    series: dict[str, StateIsotropy], random_series: dict[str, StateIsotropy]
) -> None:
    raw = series["raw"]
    st.subheader("Anisotropy, IsoScore and adjusted similarities by layer")
    line_series = series | random_series
    fig_lines = metrics_by_layer_figure(line_series)
    chart_with_downloads(
        fig_lines,
        key="aniso_metrics_chart",
        downloads="aniso_metrics",
        frame=metrics_frame(line_series),
        name="isotropy_by_layer",
        live=True,
    )
    if random_series:
        r = random_series["random init"]
        st.caption(
            "Trained vs random init, last hidden state: anisotropy "
            f"{raw.anisotropy[-1]:.3f} vs {r.anisotropy[-1]:.3f}, "
            f"IsoScore {raw.isoscore[-1]:.3f} vs {r.isoscore[-1]:.3f}."
        )


@fragment
def contribution_section(series: dict[str, StateIsotropy]) -> None:
    """Timkey & van Schijndel's per-dimension split of the mean cosine."""
    st.subheader("Which dimensions carry the cosine")
    t1, t2 = st.columns([1, 1])
    top_k = t1.slider("Top dimensions per hidden state", 1, 10, 5, key="aniso_topk")
    contrib_of = t2.radio("Vectors", list(series), key="aniso_contrib_series", horizontal=True)
    fig_contrib = cosine_contribution_figure(series[contrib_of], top_k)
    chart_with_downloads(
        fig_contrib,
        key="aniso_contrib_chart",
        downloads="aniso_contrib",
        frame=contribution_frame(series[contrib_of], top_k),
        name="cosine_contributions",
    )


def contrast_section(result: ExtractionResult, raw: StateIsotropy) -> None:
    st.subheader("Mean cosine vs IsoScore: what a mean shift does")
    centered = isotropy(result, "center", similarity=False, name="center")
    fig_contrast = mean_shift_contrast_figure(raw, centered)
    st.plotly_chart(fig_contrast, width="stretch", key="aniso_contrast_chart")
    peak = mean_shift_peak(raw, centered)
    st.markdown(
        "Subtracting the mean vector moves every token by the same offset. "
        f"At hidden state **{peak.state_name}** the mean "
        f"cosine drops from **{peak.anisotropy_raw:.3f}** to **{peak.anisotropy_centered:.3f}**, while IsoScore stays "
        f"at **{peak.isoscore:.3f}** (it depends only on the covariance). Mean cosine measures a shared direction; "
        "IsoScore measures how evenly the spread uses all dimensions."
    )
    download_buttons(
        "aniso_contrast",
        fig=fig_contrast,
        frame=contrast_frame(raw, centered),
        name="mean_cosine_vs_isoscore",
    )
