"""The Sentence similarity page (pages/similarity.py): STS Spearman by hidden state and word senses
(WiC-style), raw vs clipped. Each half is a fragment: its controls rerun only that half."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from isoscope.analysis import similarity as geometry_similarity
from isoscope.analysis.projections.postprocess import POSTPROCESSORS, parse_dims
from isoscope.analysis.similarity import (
    ThresholdSweep,
    WordSenseVectors,
    clip_dims_by_state,
    sts_by_state,
    word_sense_by_state,
    word_sense_sweeps,
)
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.inputs.pairs import (
    SentencePairs,
    WordSenseRows,
    evaluated_texts,
    read_pairs_csv,
    read_word_sense_csv,
    sts_sample,
    wic_examples,
)
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.plots.similarity import (
    sts_figure,
    sts_frame,
    sweep_figure,
    word_sense_figure,
    word_sense_frame,
)
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.widgets.ranges import SIM_CLIP, SIM_POST, SIMILARITY_CLIP_MODES
from isoscope.ui.widgets.upload import file_upload
from isoscope.ui.work.cached import cached, heavy
from isoscope.ui.work.results import outlier_dims_by_state

# ----------------------------------------------------------------------------- cached calls


Clip = str | tuple[int, ...]  # "auto", "corpus" or typed dims


@heavy("Mean-pooling sentences:")
def pool_pairs(
    loaded: LoadedModel, pairs: SentencePairs, max_length: int, batch_size: int, *, progress
) -> tuple[np.ndarray, np.ndarray]:
    """Mean-pooled vectors (S, n, d) of both sides of the sentence pairs."""
    return geometry_similarity.pool_pairs(loaded, pairs, max_length, batch_size, progress)


@heavy("Extracting the evaluated sentences (for their outlier dims):", "texts")
def evaluated_extraction(
    loaded: LoadedModel, texts: tuple[str, ...], name: str, max_length: int, batch_size: int, *,
    progress,
) -> ExtractionResult:  # fmt: skip
    """The evaluated sentences' extraction, on which clip "auto" detects the outlier dims (as the
    ``sts`` command does; through the disk cache)."""
    settings = ExtractionSettings(max_length=max_length, batch_size=batch_size)
    return cached_extract(loaded, Corpus(texts, name), settings, progress)


def _pair_vectors(
    loaded: LoadedModel, result: ExtractionResult, data: SentencePairs | WordSenseRows
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' vectors of the evaluated data: the pooled sentence pairs, or the target words."""
    max_length, batch_size = result.settings.max_length, result.settings.batch_size
    if isinstance(data, SentencePairs):
        return pool_pairs(loaded, data, max_length, batch_size)
    vectors = word_vectors(loaded, data, max_length, batch_size)
    return vectors.first, vectors.second


@cached
def clip_dims(
    loaded: LoadedModel, result: ExtractionResult, data: SentencePairs | WordSenseRows, clip: Clip
) -> list[list[int]]:
    """The dims to clip per state: "auto" = each state's outlier dims on the evaluated sentences
    (the one meaning of "auto"), "corpus" = those of the sidebar corpus, or typed dims."""
    if clip == "corpus":
        return outlier_dims_by_state(result)
    first, second = _pair_vectors(loaded, result, data)
    if clip == "auto":
        settings = result.settings
        texts = evaluated_texts(data)
        evaluated = evaluated_extraction(
            loaded, texts, data.name, settings.max_length, settings.batch_size
        )
        return clip_dims_by_state("auto", first, second, result=evaluated)
    return clip_dims_by_state(list(clip), first, second, result=result)


@cached
def sts_scores(
    loaded: LoadedModel,
    result: ExtractionResult,
    pairs: SentencePairs,
    clip: Clip,
    post: str | None,
) -> list[dict]:
    """STS Spearman x 100 per hidden state: raw, clipped and optionally post-processed."""
    first, second = _pair_vectors(loaded, result, pairs)
    dims = clip_dims(loaded, result, pairs, clip)
    return sts_by_state(first, second, pairs.scores, dims, post, state_names=result.state_names)


@cached
def word_vectors(
    loaded: LoadedModel, rows: WordSenseRows, max_length: int, batch_size: int
) -> WordSenseVectors:
    """The target word's vectors in both contexts of every row."""
    return geometry_similarity.word_vectors(loaded, rows, max_length, batch_size)


@cached
def fit_on_token_sample(result: ExtractionResult, post: str) -> list:
    """One post-processor per hidden state, fitted on the corpus's token sample."""
    return geometry_similarity.fit_on_token_sample(result, post)


def _sense_inputs(
    loaded: LoadedModel, result: ExtractionResult, rows: WordSenseRows, clip: Clip, post
) -> tuple[WordSenseVectors, list[list[int]], list | None]:
    vectors = word_vectors(loaded, rows, result.settings.max_length, result.settings.batch_size)
    dims = clip_dims(loaded, result, rows, clip)
    return vectors, dims, fit_on_token_sample(result, post) if post else None


@cached
def word_senses(
    loaded: LoadedModel,
    result: ExtractionResult,
    rows: WordSenseRows,
    clip: Clip,
    post: str | None,
) -> list[dict]:
    """Word-sense accuracy per hidden state: raw, clipped and optionally post-processed."""
    vectors, dims, fitted = _sense_inputs(loaded, result, rows, clip, post)
    return word_sense_by_state(vectors, dims, fitted, state_names=result.state_names)


@cached
def sense_sweeps(
    loaded: LoadedModel,
    result: ExtractionResult,
    rows: WordSenseRows,
    clip: Clip,
    post: str | None,
    state: int,
) -> dict[str, ThresholdSweep]:
    """The threshold sweeps at one hidden state."""
    vectors, dims, fitted = _sense_inputs(loaded, result, rows, clip, post)
    return word_sense_sweeps(vectors, state, dims[state], fitted[state] if fitted else None)


def intro(loaded: LoadedModel, result: ExtractionResult) -> None:
    max_length = result.settings.max_length
    st.caption(
        f"Model **{literal(loaded.info.display_name)}** · texts cut to {max_length} tokens (sidebar *Max tokens*) · "
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
        st.error(f"**Dimensions to clip:** {message(exc)}")
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


def read_upload(label: str, key: str, read: Callable, bundled: Callable, what: str):
    """The rows of the uploaded CSV (``read(data, file_name)``), or the ``bundled()`` ones when
    none is uploaded; None (the reason shown) when the file cannot be read."""
    upload = file_upload(label, type=["csv", "tsv", "txt"], key=key)
    try:
        return read(upload.getvalue(), upload.name) if upload is not None else bundled()
    except IsoscopeError as exc:
        st.error(f"**Cannot read the {what}.** {message(exc)}")
        return None


def clip_and_post(
    result: ExtractionResult, prefix: str, default_clip: str, post_help: str
) -> tuple[Clip | None, str | None]:
    """The clip mode and the "Also compare" post-processing, side by side."""
    c1, c2 = st.columns(2)
    with c1:
        clip = clip_controls(result, prefix, default_clip)
    with c2:
        post = post_select(prefix, post_help)
    return clip, post


def by_state_table(
    fig: go.Figure,
    frame: pd.DataFrame,
    prefix: str,
    number_columns: Sequence[str],
    number_format: str,
    name: str,
) -> None:
    """A by-state chart, its table (``number_columns`` in ``number_format``) and their downloads."""
    st.plotly_chart(fig, width="stretch", key=f"{prefix}_chart")
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            c: st.column_config.NumberColumn(format=number_format) for c in number_columns
        },
    )
    download_buttons(prefix, fig=fig, frame=frame, name=name)


# ----------------------------------------------------------------------------- STS


@fragment
def sts_section(loaded: LoadedModel, result: ExtractionResult) -> None:
    """STS Spearman by hidden state, raw / clipped / post-processed (Luo et al. 2021, Table 2)."""
    st.subheader("Sentence pairs (STS)")
    pairs = read_upload(
        "Pairs CSV: sentence1,sentence2,score (leave empty for the bundled 40 pairs)",
        "sim_sts_file",
        read_pairs_csv,
        sts_sample,
        "pairs file",
    )
    if pairs is None:
        return
    clip, post = clip_and_post(
        result,
        "sim_sts",
        "auto",
        "Fitted on the pooled vectors of the evaluated sentences at each hidden state.",
    )
    if clip is None:
        return
    st.caption(
        f"{len(pairs):,} pairs from {literal(pairs.name)}; gold scores "
        f"{pairs.scores.min():g} to {pairs.scores.max():g}."
    )
    try:
        rows = sts_scores(loaded, result, pairs, clip, post)
    except IsoscopeError as exc:
        st.error(f"**Cannot score these pairs.** {message(exc)}")
        return
    if not rows:
        return
    fig, frame = sts_figure(rows, post_label(post)), sts_frame(rows)
    by_state_table(fig, frame, "sim_sts", ("raw", "clipped", "processed"), "%.2f", "sts_by_state")


# ----------------------------------------------------------------------------- word senses


@fragment
def word_sense_section(loaded: LoadedModel, result: ExtractionResult) -> None:
    """Word-sense accuracy by hidden state (WiC-style), raw / clipped / post-processed."""
    st.subheader("Word senses (WiC-style)")
    wic = read_upload(
        "Rows CSV: word,context1,context2,same_sense (leave empty for the bundled 64 rows)",
        "sim_wic_file",
        read_word_sense_csv,
        wic_examples,
        "word-sense file",
    )
    if wic is None:
        return
    clip, post = clip_and_post(
        result,
        "sim_wic",
        "corpus",
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
            f"{literal(loaded.info.display_name)} is a decoder: turn on *Compute word senses* to run the "
            f"{len(wic)} rows."
        )
        return
    try:
        vectors = word_vectors(loaded, wic, result.settings.max_length, result.settings.batch_size)
    except IsoscopeError as exc:
        st.error(f"**Cannot use these rows.** {message(exc)}")
        return
    labels = vectors.same_sense
    st.caption(
        f"{len(labels)} of {len(wic)} rows from {literal(wic.name)} usable: {int(labels.sum())} same sense, "
        f"{int((~labels).sum())} different."
    )
    if vectors.problems:
        with st.expander(f"⚠️ {len(vectors.problems)} row(s) skipped"):
            st.markdown("\n".join(f"- {literal(p)}" for p in vectors.problems))
    rows = word_senses(loaded, result, wic, clip, post)
    fig, frame = word_sense_figure(rows, post_label(post)), word_sense_frame(rows)
    columns = [c for c in frame.columns if c.endswith(("accuracy", "threshold"))]
    by_state_table(fig, frame, "sim_wic", columns, "%.3f", "word_senses_by_state")
    sweep_section(loaded, result, wic, clip, post)


@fragment
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
