"""The Guided tour page (pages/tour.py): the five papers' central claims in order, each checked live
on the loaded model; every step is computed once per model and corpus and then cached
(isoscope.share.tour holds the claims and rules)."""

from __future__ import annotations

import streamlit as st

from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel, random_like_source
from isoscope.share import tour
from isoscope.ui.frame.literal import literal
from isoscope.ui.frame.page import explainer, load_or_stop
from isoscope.ui.frame.selection import get_selection
from isoscope.ui.widgets.ranges import TOUR_STEP
from isoscope.ui.work.cached import cached

STEPS = list(TOUR_STEP.options)
LAYERNORM_TEXTS = 16  # texts of the live ablation (a few seconds on the bundled model)


@cached
def outliers_step(result: ExtractionResult) -> tour.TourStep:
    return tour.outliers_step(result)


@cached
def layernorm_step(loaded: LoadedModel, result: ExtractionResult, n_texts: int) -> tour.TourStep:
    return tour.layernorm_step(loaded, result.texts[:n_texts])


@cached
def anisotropy_step(
    result: ExtractionResult, random_result: ExtractionResult, random_init: bool
) -> tour.TourStep:
    return tour.anisotropy_step(result, random_result, random_init)


@cached
def position_step(loaded: LoadedModel, result: ExtractionResult) -> tour.TourStep:
    return tour.position_step(loaded, result)


@cached
def nope_step() -> tour.TourStep:
    return tour.nope_step()


def _go(delta: int) -> None:
    current = STEPS.index(st.session_state.get("tour_step", STEPS[0]))
    st.session_state["tour_step"] = STEPS[max(0, min(len(STEPS) - 1, current + delta))]


def intro() -> None:
    st.caption(
        "Five claims from the papers behind isoscope, in order, each measured live on the model in the "
        "sidebar: the claim, the number and figure from this model, whether it agrees, and one thing to "
        "try. Use Previous / Next; nothing needs typing. About 3 minutes per step makes a 15-minute lecture."
    )


def choose_step() -> int:
    """The step radio (Previous / Next move it)."""
    step_id = st.radio(
        "Step",
        STEPS,
        format_func=lambda s: f"{s}. {tour.TITLES[int(s) - 1]}",
        horizontal=True,
        key="tour_step",
        label_visibility="collapsed",
    )
    return int(step_id)


def measure(loaded: LoadedModel, result: ExtractionResult, number: int) -> tour.TourStep:
    """Step ``number`` measured on the model (step 3 also runs its random-init copy)."""
    with st.spinner(f"Measuring step {number} on {literal(loaded.info.display_name)}…"):
        if number == 1:
            return outliers_step(result)
        if number == 2:
            return layernorm_step(loaded, result, LAYERNORM_TEXTS)
        if number == 3:
            source = get_selection().model_source
            if loaded.info.random_init:
                random_result = result
            else:
                _, random_result = load_or_stop(source=random_like_source(source))
            return anisotropy_step(result, random_result, loaded.info.random_init)
        if number == 4:
            return position_step(loaded, result)
        return nope_step()


def show(step: tour.TourStep) -> None:
    """The claim, this model's numbers and figure, the verdict and one thing to try."""
    st.header(f"Step {step.number} of {len(STEPS)}: {step.title}")
    st.markdown(f"> **Claim.** {step.claim}")
    st.caption(f"Source: {step.citation}")
    if step.metrics:
        columns = st.columns(len(step.metrics))
        for column, (label, value, note) in zip(columns, step.metrics, strict=True):
            column.metric(label, value)
            if note:
                column.caption(note)
    if step.figure is not None:
        st.plotly_chart(step.figure, width="stretch", key=f"tour_chart_{step.number}")
    if step.agrees is True:
        st.success(f"**This model agrees.** {step.verdict}", icon=":material/check_circle:")
    elif step.agrees is False:
        st.warning(f"**This model does not agree.** {step.verdict}", icon=":material/cancel:")
    else:
        st.info(f"**Not testable on this model.** {step.verdict}", icon=":material/help:")
    st.info(f"**Try this:** {step.try_this}", icon=":material/touch_app:")


def navigation(number: int) -> None:
    left, _, right = st.columns([1, 4, 1])
    left.button(
        "Previous",
        on_click=_go,
        args=(-1,),
        disabled=number == 1,
        key="tour_prev",
        icon=":material/arrow_back:",
        width="stretch",
    )
    right.button(
        "Next",
        on_click=_go,
        args=(1,),
        disabled=number == len(STEPS),
        key="tour_next",
        icon=":material/arrow_forward:",
        type="primary",
        width="stretch",
    )


def explain() -> None:
    explainer(
        "What is this / references",
        """
Each step states one paper's central claim, measures it on the loaded model with the same analyses as
the other pages, and applies a stated rule to say whether the model agrees:

1. **Outlier dims and clipping** (Luo, Kulmizev & Mao 2021, arXiv 2011.04393; Timkey & van Schijndel 2021,
   arXiv 2109.04404): agrees when zeroing the outlier dims of the state where the headline dim is strongest
   removes at least half of that state's anisotropy.
2. **LayerNorm outliers** (Kovaleva et al. 2021, *BERT Busters*, arXiv 2105.06990): agrees when zeroing the
   LayerNorm outlier dims moves the final sentence embedding further than every random control of the same
   size (16 texts, 3 controls).
3. **Anisotropy** (Ethayarajh 2019, arXiv 1909.00512; Godey et al. 2024, arXiv 2401.12143): agrees when the
   highest mean cosine is at least 0.1 and lies above the embedding layer; the random-init copy of the
   same architecture (seed 0) runs on the same texts and pairs.
4. **Where position lives** (Luo et al. 2021, section 4): agrees when a bias-free linear probe reads
   absolute position at `emb` with at least twice the majority baseline and loses accuracy by the last state.
5. **Variance without position embeddings** (Chi et al. 2023, arXiv 2305.13571): agrees when the attention
   output's variance in layer 1 of random causal NoPE GPT-2 models falls with log-log slope between -1.3 and
   -0.7 (theory -1) and is flat (within ±0.2) without the causal mask.

Every step is computed once per model and corpus and cached; the first visit of step 3 runs the random-init
copy on the corpus (as long as the first extraction).
""",
    )
