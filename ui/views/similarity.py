"""The Sentence similarity page (pages/similarity.py): STS Spearman by hidden state and word senses
(WiC-style), raw vs clipped. Each half is a fragment: its controls rerun only that half (issue 15)."""

from __future__ import annotations

import streamlit as st

from backend.analysis.geometry.postprocess import POSTPROCESSORS, parse_dims
from backend.engine.errors import IsoscopeError
from backend.engine.extraction import ExtractionResult
from backend.engine.models import LoadedModel
from backend.engine.pairs import (
    WordSenseRows,
    read_pairs_csv,
    read_word_sense_csv,
    sts_sample,
    wic_examples,
)
from backend.plots.similarity import (
    sts_figure,
    sts_frame,
    sweep_figure,
    word_sense_figure,
    word_sense_frame,
)
from ui.cached import (
    Clip,
    outlier_dims_by_state,
    sense_sweeps,
    sts_scores,
    word_senses,
    word_vectors,
)
from ui.common import download_buttons, explainer
from ui.ranges import SIM_CLIP, SIM_POST, SIMILARITY_CLIP_MODES


def intro(loaded: LoadedModel, result: ExtractionResult) -> None:
    max_length = result.settings.max_length
    st.caption(
        f"Model **{loaded.info.display_name}** · texts cut to {max_length} tokens (sidebar *Max tokens*) · "
        "clipping sets dimensions to 0 in the pooled / word vectors; the model is untouched."
    )


def clip_controls(result: ExtractionResult, prefix: str, default: str) -> Clip | None:
    """Clip-mode selector (+ typed dims): "auto", "corpus", a tuple of dims, or None on a typing error."""
    mode = st.selectbox(
        "Clip",
        SIM_CLIP.options,
        index=SIM_CLIP.options.index(default),
        format_func=SIMILARITY_CLIP_MODES.get,
        key=f"{prefix}_clip_mode",
    )
    if mode != "typed":
        return mode
    default_dims = next((dims for dims in reversed(outlier_dims_by_state(result)) if dims), [])
    typed = st.text_input(
        "Dimensions to clip",
        value=", ".join(map(str, default_dims)),
        key=f"{prefix}_clip_dims",
        help="Comma-separated indices, zeroed at every hidden state.",
    )
    try:
        return tuple(parse_dims(typed, result.hidden_size))
    except IsoscopeError as exc:
        st.error(f"**Dimensions to clip:** {exc}")
        return None


def post_select(prefix: str, help_text: str) -> str | None:
    """The "Also compare" post-processing (None: nothing else)."""
    post = st.selectbox(
        "Also compare",
        SIM_POST.options,
        index=SIM_POST.index,
        format_func=lambda p: "nothing else" if p == "none" else POSTPROCESSORS[p].label,
        key=f"{prefix}_post",
        help=help_text,
    )
    return None if post == "none" else post


def post_label(name: str | None) -> str | None:
    return POSTPROCESSORS[name].label.split(" (")[0] if name else None


# ----------------------------------------------------------------------------- STS


@st.fragment
def sts_section(loaded: LoadedModel, result: ExtractionResult) -> None:
    """STS Spearman by hidden state, raw / clipped / post-processed (Luo et al. 2021, Table 2)."""
    st.subheader("Sentence pairs (STS)")
    upload = st.file_uploader(
        "Pairs CSV: sentence1,sentence2,score (leave empty for the bundled 40 pairs)",
        type=["csv", "tsv", "txt"],
        key="sim_sts_file",
    )
    try:
        pairs = (
            read_pairs_csv(upload.getvalue(), upload.name) if upload is not None else sts_sample()
        )
    except IsoscopeError as exc:
        st.error(f"**Cannot read the pairs file.** {exc}")
        return
    c1, c2 = st.columns(2)
    with c1:
        clip = clip_controls(result, "sim_sts", "auto")
    with c2:
        post = post_select(
            "sim_sts",
            "Fitted on the pooled vectors of the evaluated sentences at each hidden state.",
        )
    if clip is None:
        return
    st.caption(
        f"{len(pairs):,} pairs from {pairs.name}; gold scores {pairs.scores.min():g} to {pairs.scores.max():g}."
    )
    try:
        rows = sts_scores(loaded, result, pairs, clip, post)
    except IsoscopeError as exc:
        st.error(f"**Cannot score these pairs.** {exc}")
        return
    if not rows:
        return
    fig = sts_figure(rows, post_label(post))
    st.plotly_chart(fig, width="stretch", key="sim_sts_chart")
    frame = sts_frame(rows)
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.2f") for c in ("raw", "clipped", "processed")
        },
    )
    download_buttons("sim_sts", fig=fig, frame=frame, name="sts_by_state")


# ----------------------------------------------------------------------------- word senses


@st.fragment
def word_sense_section(loaded: LoadedModel, result: ExtractionResult) -> None:
    """Word-sense accuracy by hidden state (WiC-style), raw / clipped / post-processed."""
    st.subheader("Word senses (WiC-style)")
    upload = st.file_uploader(
        "Rows CSV: word,context1,context2,same_sense (leave empty for the bundled 64 rows)",
        type=["csv", "tsv", "txt"],
        key="sim_wic_file",
    )
    try:
        wic = (
            read_word_sense_csv(upload.getvalue(), upload.name)
            if upload is not None
            else wic_examples()
        )
    except IsoscopeError as exc:
        st.error(f"**Cannot read the word-sense file.** {exc}")
        return
    c1, c2 = st.columns(2)
    with c1:
        clip = clip_controls(result, "sim_wic", "corpus")
    with c2:
        post = post_select(
            "sim_wic",
            "Fitted on the sidebar corpus's token sample at each hidden state, then applied to the word vectors.",
        )
    if clip is None:
        return
    if loaded.info.is_causal and not st.toggle(
        "Compute word senses",
        value=False,
        key="sim_wic_run",
        help="Off by default for decoders: two forward passes per row through every layer (most of "
        "this page's time on SmolLM2), and a causal model's word vector sees only its left context.",
    ):
        st.caption(
            f"{loaded.info.display_name} is a decoder: turn on *Compute word senses* to run the "
            f"{len(wic)} rows."
        )
        return
    try:
        vectors = word_vectors(loaded, wic, result.settings.max_length, result.settings.batch_size)
    except IsoscopeError as exc:
        st.error(f"**Cannot use these rows.** {exc}")
        return
    labels = vectors.same_sense
    st.caption(
        f"{len(labels)} of {len(wic)} rows from {wic.name} usable: {int(labels.sum())} same sense, "
        f"{int((~labels).sum())} different."
    )
    if vectors.problems:
        with st.expander(f"⚠️ {len(vectors.problems)} row(s) skipped"):
            st.markdown("\n".join(f"- {p}" for p in vectors.problems))
    rows = word_senses(loaded, result, wic, clip, post)
    fig = word_sense_figure(rows, post_label(post))
    st.plotly_chart(fig, width="stretch", key="sim_wic_chart")
    frame = word_sense_frame(rows)
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format="%.3f")
            for c in frame.columns
            if c.endswith(("accuracy", "threshold"))
        },
    )
    download_buttons("sim_wic", fig=fig, frame=frame, name="word_senses_by_state")
    sweep_section(loaded, result, wic, clip, post)


@st.fragment
def sweep_section(
    loaded: LoadedModel, result: ExtractionResult, wic: WordSenseRows, clip: Clip, post: str | None
) -> None:
    """Accuracy against the cosine threshold at one hidden state."""
    names = result.state_names
    state = st.selectbox(
        "Threshold sweep at state",
        range(len(names)),
        index=len(names) - 1,
        format_func=lambda s: names[s],
        key="sim_wic_sweep_state",
    )
    sweeps = sense_sweeps(loaded, result, wic, clip, post, state)
    st.plotly_chart(sweep_figure(sweeps, names[state]), width="stretch", key="sim_wic_sweep_chart")


def explain() -> None:
    explainer(
        "What is this / references",
        """
**Sentence similarity** (Luo, Kulmizev & Mao 2021, *Positional Artefacts Propagate Through Masked Language Model
Embeddings*, arXiv 2011.04393, Table 2): each sentence is mean-pooled at every hidden state (all non-padding
tokens, special tokens included, as sentence-transformers does), the cosine of each pair is compared with the
gold scores by Spearman's rank correlation × 100 (scipy). Luo et al. report that zeroing the outlier dimensions
raises BERT's STS-B score from 58.6 to 63.1 (RoBERTa 56.6 → 60.6). The input format is the STS Benchmark's
(Cer et al. 2017, arXiv 1708.00055): `sentence1,sentence2,score`, with a header line (or the header-less
three-column file). For the default model the command `isoscope sts` reproduces the published STS-B
test score of all-MiniLM-L6-v2 (82.03) at the last hidden state.

**Clip** modes: *each state's outlier dims* zeroes, per hidden state, the headline outlier dimensions
(z-score or extreme-index, as on the Outlier dimensions page) detected on the evaluated sentences (the
`--clip auto` of the CLI; `--clip largest-mean` keeps the older two-largest-|mean| rule); *detected on the
corpus* uses the outlier dimensions of the sidebar corpus at each state; or type your own.
**Also compare** fits a post-processing per hidden state: standardisation (Timkey & van Schijndel 2021,
arXiv 2109.04404), mean-centering / all-but-the-top (Mu & Viswanath 2018, arXiv 1702.01417; D = d/100) or
whitening (Su et al. 2021, arXiv 2103.15316). With few pairs (the bundled 40), whitening and all-but-the-top are
fitted on few vectors and are noisy.

**Word senses** (Luo et al. 2021, after WiC by Pilehvar & Camacho-Collados 2019, arXiv 1808.09121): the target
word's vectors in the two contexts (its word pieces averaged; an inflected form such as *banks* counts), the
cosine per hidden state, and the accuracy of "same sense iff cosine > t". The best t is chosen on the same rows,
which flatters the score; the dotted lines choose t without the row being predicted (leave-one-out), an honest
estimate. With balanced labels chance is 0.5. The bundled 64 rows (16 ambiguous words such as *bank*, *bat*,
*pitch*, *key*; half same sense) and the 40 sentence pairs were written for this project and are CC0.
""",
    )
