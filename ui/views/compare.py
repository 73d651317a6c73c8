"""The Compare page (pages/compare.py): side B's extraction (another model, or another corpus), the
memoised comparison, and the checkpoint trajectory."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import streamlit as st

from isoscope.analysis.compare.comparison import (
    Comparison,
    compare_with_cache,
    comparison_report,
    with_cards,
)
from isoscope.analysis.compare.trajectory import Trajectory, resolve_checkpoints, run_trajectory
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.inputs.pairs import SentencePairs, read_pairs_csv, sts_sample
from isoscope.engine.load.models import LoadedModel, fingerprint_folder
from isoscope.engine.store.cache import ResultCache
from isoscope.plots.compare import (
    TRAJECTORY_METRICS,
    abs_mean_diff_frame,
    abs_mean_diff_heatmap,
    cka_frame,
    cka_heatmap,
    emergence_figure,
    ln_diff_heatmap,
    ln_gamma_flag_heatmap,
    outlier_change_figure,
    state_metric_figure,
    states_frame,
    trajectory_figure,
    trajectory_frame,
)
from isoscope.plots.overview import model_card_rows
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.selection import Selection, get_selection
from isoscope.ui.frame.sidebar import CUSTOM, corpus_label, model_b_options
from isoscope.ui.server import access
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.ranges import CMP_ESTIMATOR, CMP_MODE, CMP_TRAJ_METRIC, ESTIMATORS, MODES
from isoscope.ui.widgets.upload import file_upload
from isoscope.ui.work.cached import heavy
from isoscope.ui.work.corpora import get_corpus, media_items, remember_upload
from isoscope.ui.work.extraction import get_extraction
from isoscope.ui.work.media import MEDIA_NOUN


def model_b_extraction(source: str) -> tuple[LoadedModel, ExtractionResult]:
    """Model ``source`` on the sidebar's corpus and settings (memory, disk cache, else a run)."""
    return get_extraction(source=source)


def corpus_b_selection(kind: str, text: str = "", upload=None) -> Selection:
    """The sidebar's selection with corpus B instead: "bundled", "paste" (``text``) or "upload"."""
    sel = get_selection()
    if kind == "paste":
        return replace(sel, corpus_kind="paste", corpus_text=text)
    if kind == "upload":
        raw = upload.getvalue()
        sha = hashlib.sha256(raw).hexdigest()[:20]
        remember_upload(sha, upload.name, raw)
        return replace(sel, corpus_kind="upload", corpus_file_name=upload.name, corpus_file_sha=sha)
    return replace(sel, corpus_kind="bundled")


def corpus_b_extraction(selection_b: Selection) -> tuple[LoadedModel, ExtractionResult]:
    get_corpus(selection_b)  # a bad corpus raises before any model work
    return get_extraction(selection_b)


@heavy("Comparing A and B (CKA on every pair of hidden states)…")
def _comparison(
    result_a: ExtractionResult, result_b: ExtractionResult, loaded_a: LoadedModel,
    loaded_b: LoadedModel, pairs: SentencePairs | None, debiased: bool | None, label_a: str,
    label_b: str, _inputs: tuple | None, *, progress,
) -> Comparison:  # fmt: skip
    """``_inputs`` (an image / audio analysis's items) is named by ``result_a``'s corpus hash."""
    return compare_with_cache(
        ResultCache(), result_a, result_b, loaded_a=loaded_a, loaded_b=loaded_b, pairs=pairs,
        debiased=debiased, label_a=label_a, label_b=label_b, inputs=_inputs,
    )  # fmt: skip


def comparison(
    loaded_a: LoadedModel,
    result_a: ExtractionResult,
    loaded_b: LoadedModel,
    result_b: ExtractionResult,
    *,
    pairs=None,
    debiased: bool | None = None,
    label_a: str = "A",
    label_b: str = "B",
) -> Comparison:
    """:func:`isoscope.analysis.compare.comparison.compare`, memoised in memory and in the disk
    cache (a restart reopens it without recomputing the CKA). An image or audio analysis passes
    the sidebar's items, which CKA pools when the tokens differ."""
    inputs = media_items(result_a)
    kept = _comparison(
        result_a, result_b, loaded_a, loaded_b, pairs, debiased, label_a, label_b, inputs
    )
    return with_cards(kept, result_a, result_b)  # kept per extraction: name what was opened now


def trajectory_paths(text: str) -> list[str]:
    """One folder per non-empty line of the text box."""
    return [line.strip() for line in text.splitlines() if line.strip()]


@heavy("Trajectory:", "checkpoints")
def _trajectory(
    identity: tuple, corpus: Corpus, settings: ExtractionSettings, device: str, dtype: str,
    allow_pickle: bool, _checkpoints: list, *, progress,
) -> Trajectory:  # fmt: skip
    """``identity``: each checkpoint's (step, path, folder fingerprint), which names ``_checkpoints``."""
    return run_trajectory(
        _checkpoints, corpus, settings, device=device, dtype=dtype, allow_pickle=allow_pickle,
        cache=ResultCache(), progress=progress,
    )  # fmt: skip


def trajectory_of(paths: list[str]) -> Trajectory:
    """The trajectory of ``paths`` (a folder of checkpoints, or checkpoint folders) on the sidebar's
    corpus and settings, memoised by each checkpoint's fingerprint: adding a checkpoint reruns the
    summary, and the disk cache makes only the new checkpoint's extraction run."""
    sel = get_selection()
    for (
        path
    ) in paths:  # a shared server opens only the operator's folders (isoscope.ui.server.access)
        access.policy().check_model_source(path)
    checkpoints = resolve_checkpoints(paths)
    identity = tuple((c.step, str(c.path), _fingerprint(c.path)) for c in checkpoints)
    corpus = get_corpus(sel)
    return _trajectory(
        identity, corpus, sel.settings, sel.device, sel.dtype, sel.allow_pickle, checkpoints
    )


def _fingerprint(path) -> str:
    try:
        return fingerprint_folder(path)
    except OSError:
        return "unreadable"


def explain() -> None:
    explainer(
        "What is this / how to read it / references",
        """
**A against B.** Model A is the one chosen in the sidebar; model B is any source the loader takes (by
default a random-init copy of A's architecture: `random-like:SOURCE`). Both run on the sidebar's corpus with
the same settings. Or keep one model and compare two corpora (e.g. in-domain vs out-of-domain text).

**Linear CKA** (Kornblith, Norouzi, Lee & Hinton 2019) compares two representations of the *same inputs*:
with centred X (n × d₁) and Y (n × d₂), CKA = ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F). It is 1 for a representation
against itself (or a rotation or uniform scaling of it), is not fooled by different widths, and falls when
the geometry differs. Every hidden state of A is compared with every hidden state of B; the diagonal (same
index) is outlined. When both models tokenize the corpus identically, the rows are the same sampled tokens;
otherwise they are mean-pooled text vectors (one per text), and the page says so. Images and audio clips
work the same way: two models on the sidebar's folder, on the same patches or frames when both cut the
inputs alike (a checkpoint against its `random-like:` copy), else one mean-pooled vector per image or clip.
The **debiased**
estimator (unbiased HSIC, Song et al. 2012; used by Kornblith et al.) removes the upward bias of small n; on
*auto* it is used for text vectors. A trained model against a random-init copy gives values well below 1.

**Per hidden state** (states both models have): anisotropy (Ethayarajh 2019) and IsoScore (Rudman et al.
2022) on each side's own token sample; outlier dims (z-score or extreme-index, as on the Outlier page)
kept, gained by B and lost by B; |mean| per dim of B minus A; the share of the mean cosine carried by the
top 3 dims (Timkey & van Schijndel 2021); STS Spearman by state when pairs are given (Luo et al. 2021).
Dims are compared only when the widths match. **LayerNorm** γ/β differences per dim show which dims moved
in fine-tuning (Kovaleva et al. 2021) when both models have the same norms.

**Sources**
- Kornblith et al. 2019, *Similarity of Neural Network Representations Revisited*, [arXiv 1905.00414](https://arxiv.org/abs/1905.00414)
- Ethayarajh 2019, [arXiv 1909.00512](https://arxiv.org/abs/1909.00512); Rudman et al. 2022 (IsoScore), [arXiv 2108.07344](https://arxiv.org/abs/2108.07344)
- Timkey & van Schijndel 2021, [arXiv 2109.04404](https://arxiv.org/abs/2109.04404); Luo, Kulmizev & Mao 2021, [arXiv 2011.04393](https://arxiv.org/abs/2011.04393)
- Kovaleva et al. 2021, *BERT Busters*, [arXiv 2105.06990](https://arxiv.org/abs/2105.06990); Godey et al.
  2023 (trained vs random init), [arXiv 2306.07656](https://arxiv.org/abs/2306.07656)
""",
    )


def _choose_b(kind_a: str, selection: Selection, corpus_a: str):
    """Side B's inputs; returns (loaded_b, result_b, model label, corpus label) or None (a
    message is shown)."""
    mode = st.radio("Compare", CMP_MODE.options, horizontal=True, key="cmp_mode")
    if mode != MODES[0] and kind_a != "text":
        st.info(
            "Two corpora are compared for text only: this analysis read "
            f"{MEDIA_NOUN[kind_a]}; compare two models on the sidebar's folder instead."
        )
        return None
    if mode == MODES[0]:
        options = model_b_options(selection.model_source)
        c1, c2 = st.columns([2, 3])
        choice = c1.selectbox("Model B", list(options), key="cmp_model_b")
        source = options[choice]
        if source == CUSTOM:
            source = c2.text_input(
                "Custom model B",
                key="cmp_model_b_custom",
                placeholder="/path/to/checkpoint, org/name, random:gpt2:layers=6, random-like:…",
            ).strip()
            if not source:
                st.info(
                    "Type model B (a checkpoint folder, a Hub id org/name, random:… or random-like:…)."
                )
                return None
        loaded_b, result_b = model_b_extraction(source)
        return loaded_b, result_b, source, corpus_a
    c1, c2 = st.columns([1, 3])
    kind = c1.radio(
        "Corpus B", ["paste text", "upload a file", "bundled sample corpus"], key="cmp_corpus_b"
    )
    if kind == "paste text":
        text = c2.text_area("Corpus B: one text per line", key="cmp_corpus_b_text", height=120)
        if not text.strip():
            st.info("Paste corpus B (one text per line) to compare it with the sidebar's corpus.")
            return None
        sel_b = corpus_b_selection("paste", text=text)
        corpus_b = corpus_label("paste")
    elif kind == "upload a file":
        upload = file_upload(
            "Corpus B (.txt one text per line; .csv/.jsonl with a text column)",
            type=["txt", "csv", "jsonl"],
            key="cmp_corpus_b_file",
            where=c2,
        )
        if upload is None:
            st.info("Upload corpus B to compare it with the sidebar's corpus.")
            return None
        sel_b = corpus_b_selection("upload", upload=upload)
        corpus_b = corpus_label("upload", upload.name)
    else:
        sel_b = corpus_b_selection("bundled")
        corpus_b = corpus_label("bundled")
    loaded_b, result_b = corpus_b_extraction(sel_b)
    return loaded_b, result_b, selection.model_source, corpus_b


def _pairs(kind_a: str) -> SentencePairs | None:
    if kind_a != "text":
        st.caption(
            f"STS by state does not apply: it scores sentence pairs, and this analysis read "
            f"{MEDIA_NOUN[kind_a]}."
        )
        return None
    choice = st.radio(
        "STS by state",
        ["none", "bundled sample pairs", "upload a CSV"],
        horizontal=True,
        key="cmp_sts",
        help="sentence1,sentence2,score CSV (STS-B format): Spearman x 100 per hidden state for A and B.",
    )
    if choice == "bundled sample pairs":
        return sts_sample()
    if choice == "upload a CSV":
        upload = file_upload("Pairs CSV", type=["csv"], key="cmp_sts_file")
        return read_pairs_csv(upload.getvalue(), upload.name) if upload is not None else None
    return None


def pair_tab(loaded_a: LoadedModel, result_a: ExtractionResult) -> None:
    """Model A against model B on one corpus, or one model on corpus A against corpus B."""
    KIND = result_a.input_kind  # images and audio: model against model on the sidebar's folder
    selection = get_selection()
    CORPUS_A = corpus_label(selection.corpus_kind, selection.corpus_file_name)
    try:
        chosen = _choose_b(KIND, selection, CORPUS_A)
    except IsoscopeError as exc:
        st.error(f"**Cannot load side B.** {message(exc)}")
        return
    if chosen is None:
        return
    loaded_b, result_b, label_b, corpus_b = chosen
    c1, c2 = st.columns([1, 2])
    estimator = c1.radio(
        "CKA estimator",
        CMP_ESTIMATOR.options,
        horizontal=True,
        key="cmp_estimator",
        help="auto: plain on tokens, debiased on text vectors (few inputs).",
    )
    with c2:
        try:
            pairs = _pairs(KIND)
        except IsoscopeError as exc:
            st.error(f"**Cannot read the pairs file.** {message(exc)}")
            pairs = None
    try:
        c = comparison(
            loaded_a,
            result_a,
            loaded_b,
            result_b,
            pairs=pairs,
            debiased=ESTIMATORS[estimator],
            label_a="A",
            label_b="B",
        )
    except IsoscopeError as exc:
        st.error(f"**Cannot compare A and B.** {message(exc)}")
        return
    sides = (
        (result_a.model, selection.model_source, CORPUS_A),
        (result_b.model, label_b, corpus_b),
    )
    side_cards(c, sides)
    cka_section(c, KIND)
    state_metrics_section(c, pairs, KIND)
    outlier_change_section(c)
    mean_diff_section(c)
    ln_diff_section(c)


def side_cards(c: Comparison, sides: tuple[tuple[dict, str, str], ...]) -> None:
    """Each side's model card (its card, model and corpus labels), and the comparison's notes."""
    for col, side, (card, model, corpus) in zip(st.columns(2), "AB", sides, strict=True):
        with col:
            st.markdown(f"**{side}: {literal(model)}** · {literal(corpus)}")
            st.dataframe(model_card_rows(card), hide_index=True, width="stretch", height=240)
    for note in c.notes:
        st.info(message(note))


def cka_section(c: Comparison, kind: str) -> None:
    """The states x states linear CKA of A and B, where both sides saw the same inputs."""
    st.subheader("Representation similarity (linear CKA)")
    if c.cka is not None:
        basis = (
            f"the same {c.cka.n:,} sampled tokens in both models"
            if c.cka.basis == "tokens"
            else f"{c.cka.n:,} mean-pooled {'text' if kind == 'text' else 'item'} vectors (the two "
            "models tokenize the inputs differently)"
        )
        estimator_text = "debiased (unbiased HSIC)" if c.cka.debiased else "plain"
        st.caption(f"Computed on {basis}; {estimator_text} estimator. Diagonal outlined.")
        fig = cka_heatmap(c.cka.matrix, c.a.state_names, c.b.state_names, "A", "B")
        st.plotly_chart(fig, width="stretch", key="cmp_cka")
        diag = ", ".join(f"{c.a.state_names[i]}: {v:.2f}" for i, v in enumerate(c.cka.diagonal))
        st.markdown(f"**Diagonal (same hidden state):** {diag}")
        download_buttons(
            "cmp_cka",
            fig=fig,
            frame=cka_frame(c.cka.matrix, c.a.state_names, c.b.state_names),
            name="isoscope_cka",
        )
    else:
        st.caption(
            "CKA needs the same inputs on both sides; with two corpora only the statistics are compared."
        )


def state_metrics_section(c: Comparison, pairs: SentencePairs | None, kind: str) -> None:
    """Anisotropy, IsoScore, top-dimension share and STS per hidden state, A beside B."""
    st.subheader("Per hidden state")
    m1, m2 = st.columns(2)
    m1.plotly_chart(
        state_metric_figure(c, "anisotropy", "A", "B"), width="stretch", key="cmp_aniso"
    )
    m2.plotly_chart(state_metric_figure(c, "isoscore", "A", "B"), width="stretch", key="cmp_iso")
    m3, m4 = st.columns(2)
    m3.plotly_chart(state_metric_figure(c, "top_share", "A", "B"), width="stretch", key="cmp_top")
    if c.sts_a is not None:
        m4.plotly_chart(state_metric_figure(c, "sts", "A", "B"), width="stretch", key="cmp_sts_fig")
        m4.caption(f"{len(pairs):,} pairs from {literal(pairs.name)}.")
    elif kind == "text":
        m4.caption("Choose sentence pairs above for STS by state.")


def outlier_change_section(c: Comparison) -> None:
    st.subheader("Outlier dimensions: kept, gained, lost")
    fig = outlier_change_figure(c, "A", "B")
    st.plotly_chart(fig, width="stretch", key="cmp_outliers")
    table = states_frame(c)
    st.dataframe(table, hide_index=True, width="stretch")
    download_buttons(
        "cmp_states",
        fig=fig,
        frame=table,
        json_data=comparison_report(c),
        name="isoscope_compare",
    )


def mean_diff_section(c: Comparison) -> None:
    if c.abs_mean_diff is not None:
        st.subheader("|mean| per dim: B minus A")
        fig = abs_mean_diff_heatmap(c.abs_mean_diff, c.a.state_names, "A", "B")
        chart_with_downloads(
            fig,
            key="cmp_mean_diff",
            downloads="cmp_mean_diff",
            frame=abs_mean_diff_frame(c.abs_mean_diff, c.a.state_names),
            name="isoscope_abs_mean_diff",
        )


def ln_diff_section(c: Comparison) -> None:
    if c.ln is not None:
        st.subheader("LayerNorm γ and β: B minus A")
        which = st.radio("Parameter", ["gamma", "beta"], horizontal=True, key="cmp_ln_which")
        fig = ln_diff_heatmap(c.ln, which)
        st.plotly_chart(fig, width="stretch", key="cmp_ln")
        moved = ", ".join(f"{j} ({v:.2f})" for j, v in c.ln.moved_dims(8))
        st.markdown(f"**Dims that moved most** (largest |Δγ| or |Δβ| over the norms): {moved}")
        download_buttons("cmp_ln", fig=fig, frame=c.ln.to_frame(), name="isoscope_ln_diff")


def trajectory_tab() -> None:
    """The statistics of a run's checkpoints, step by step."""
    explainer(
        "Checkpoint trajectory: what is this / references",
        """
Give a folder of checkpoints as the Hugging Face Trainer writes them (`checkpoint-500/`, …) or named
`step1000/`, or one checkpoint folder per line. They are sorted by step and run on the sidebar's corpus and
settings, one at a time; each extraction is cached on disk, so adding a checkpoint computes only that one.
Per hidden state and step: the largest |mean| over dims, the outlier dims (when each first appears),
anisotropy and IsoScore; per LayerNorm, the dims whose γ lies more than 3 std from the norm's mean (BERT
Busters). A checkpoint that fails to load, or has another architecture than the first, is skipped with a
message; the others are kept.

Sources: Kovaleva et al. 2021 ([arXiv 2105.06990](https://arxiv.org/abs/2105.06990)) trace LayerNorm
outliers through pre-training; Puccetti et al. 2022 ([arXiv 2205.11380](https://arxiv.org/abs/2205.11380))
tie them to token frequency; Pythia publishes 154 checkpoints per model for such studies.
""",
    )
    text = st.text_area(
        "Checkpoint folder, or one checkpoint folder per line",
        key="cmp_traj_paths",
        height=90,
        placeholder="/path/to/run (holding checkpoint-100/, checkpoint-200/, …)",
    )
    if st.button("Run trajectory", key="cmp_traj_run", type="primary"):
        st.session_state["cmp_traj_paths_run"] = trajectory_paths(text)
    paths = st.session_state.get("cmp_traj_paths_run")
    if not paths:
        st.info("Give the checkpoints and press **Run trajectory**.")
        return
    try:
        t = trajectory_of(paths)
    except IsoscopeError as exc:
        st.error(f"**Cannot run the trajectory.** {message(exc)}")
        return
    for error in t.errors:
        st.error(message(error))
    if not t.points:
        st.warning("No checkpoint could be analysed.")
        return
    if t.errors:
        st.warning(f"Showing the {len(t.points)} checkpoint(s) that worked.")
    st.caption(
        f"{len(t.points)} checkpoints, steps {', '.join(map(str, t.steps))} · "
        f"{literal(t.points[0].model.get('architecture'))} · "
        f"{t.points[0].model.get('num_layers')} layers, "
        f"width {t.points[0].model.get('hidden_size')}"
    )
    metric = st.selectbox(
        "Figure",
        CMP_TRAJ_METRIC.options,
        format_func=TRAJECTORY_METRICS.get,
        key="cmp_traj_metric",
    )
    fig = trajectory_figure(t, metric)
    st.plotly_chart(fig, width="stretch", key="cmp_traj_lines")
    frame = trajectory_frame(t)
    download_buttons(
        "cmp_traj",
        fig=fig,
        frame=frame,
        json_data=t.to_json(),
        name="isoscope_trajectory",
    )
    st.subheader("Which dims become outliers, and when")
    emergence = t.emergence()
    if emergence:
        st.plotly_chart(emergence_figure(t), width="stretch", key="cmp_traj_emergence")
        st.dataframe(emergence, hide_index=True, width="stretch")
    else:
        st.caption("No hidden-state outlier dims at any checkpoint.")
    if t.points[0].ln_gamma_flags:
        st.subheader("LayerNorm γ outliers over steps")
        st.plotly_chart(ln_gamma_flag_heatmap(t), width="stretch", key="cmp_traj_ln")
        st.caption(
            "LN outlier dims (flagged in at least half of the default norms), per step: "
            + "; ".join(
                f"{p.step}: {', '.join(map(str, p.ln_outlier_dims)) or '—'}" for p in t.points
            )
        )
