"""The LayerNorm page (pages/layernorm.py): outlier gamma/beta dims (BERT Busters), their overlap
with hidden-state outliers, the ablation lab against random controls, the one-dimension-at-a-time
sweep, trained vs random."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from isoscope.analysis.layernorm.ablation import (
    AblationReport,
    SweepResult,
    has_mlm_checkpoint,
    parse_dims,
    run_ablation,
    sweep,
)
from isoscope.analysis.layernorm.params import (
    ROLE_LABELS,
    LNOutliers,
    LNParams,
    NormSite,
    default_roles,
    detect_outliers,
    ln_params,
    norms_of,
    select_norms,
)
from isoscope.analysis.layernorm.thresholds import LN_K, LN_SHARE, RANDOM_CONTROLS
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.inputs.media import MediaCorpus
from isoscope.engine.inputs.pairs import sts_sample
from isoscope.engine.load.models import LoadedModel, is_random_like, random_like_source
from isoscope.plots.layernorm import (
    METRIC_LABELS,
    ablation_vs_controls,
    available_metrics,
    flag_counts_bar,
    mlm_loss_figure,
    overlap_figure,
    overlap_table,
    param_heatmap,
    sweep_bar,
)
from isoscope.ui.frame.failure import fragment
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.selection import get_selection
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.links import dimension_links
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import interval_slider
from isoscope.ui.work.cached import cached, heavy
from isoscope.ui.work.corpora import media_corpus_for
from isoscope.ui.work.media import MEDIA_NOUN
from isoscope.ui.work.models import get_model
from isoscope.ui.work.results import outlier_dims_by_state

# ----------------------------------------------------------------------------- cached calls


@heavy("Ablation runs:", "batches")
def ablation_report(
    model: LoadedModel,
    texts: tuple[str, ...] | MediaCorpus,
    dims: tuple[int, ...],
    norms: tuple[str, ...],
    controls: int,
    with_sts: bool,
    max_length: int,
    *,
    progress,
) -> AblationReport:
    """Disable ``dims`` in ``norms`` against ``controls`` random-dimension controls (BERT Busters);
    ``texts`` may be images or clips (a :class:`MediaCorpus`, keyed by its content hash)."""
    pairs = None
    if with_sts:
        sample = sts_sample()
        pairs = (sample.sentence1, sample.sentence2, sample.scores)
    return run_ablation(
        model,
        _inputs(texts),
        list(dims),
        norms=list(norms),
        random_controls=controls,
        seed=0,
        max_length=max_length,
        pairs=pairs,
        progress=progress,
    )


@heavy("Ablated (press Stop in the top-right to leave; it stops when nobody waits):", "dims")
def dim_sweep(
    model: LoadedModel, texts: tuple[str, ...] | MediaCorpus, max_length: int, *, progress
) -> SweepResult:
    """Every dimension ablated alone in the default LayerNorms (16 ablated copies per pass)."""
    return sweep(model, _inputs(texts), max_length=max_length, copies=16, progress=progress)


def _inputs(texts: tuple[str, ...] | MediaCorpus) -> list:
    """What the ablation runs on: the texts, or the images / clips of a media corpus."""
    return list(texts.items) if isinstance(texts, MediaCorpus) else list(texts)


UNITS = {"text": "Texts", "image": "Images", "audio": "Clips"}


@cached
def norm_sites(model: LoadedModel) -> list[NormSite]:
    """Every LayerNorm / RMSNorm of the model, named and with its role."""
    return norms_of(model)


@cached
def mlm_checkpoint(source: str) -> bool:
    """Whether the checkpoint has trained masked-LM head weights (its config says so)."""
    return has_mlm_checkpoint(source)


@cached
def ln_outliers(
    model: LoadedModel, roles: tuple[str, ...], k: float, share: float
) -> tuple[list[NormSite], LNOutliers]:
    """The norms of ``roles`` and the dims they flag (BERT Busters' criterion)."""
    chosen = select_norms(norm_sites(model), list(roles))
    return chosen, detect_outliers(ln_params(chosen), k=k, share=share)


@cached
def all_ln_outliers(model: LoadedModel, k: float, share: float) -> tuple[LNParams, LNOutliers]:
    """Every norm's parameters and flags (the heatmaps show them all)."""
    params = ln_params(norm_sites(model))
    return params, detect_outliers(params, k=k, share=share)


def choose_weights() -> tuple[str, float, float]:
    """(trained or random-init copy, k, share)."""
    c1, c2, c3 = st.columns([1.3, 1, 1])
    weights = c1.radio(
        "Weights",
        ["trained", "random-init copy"],
        horizontal=True,
        key="ln_weights",
        help="The random-init copy has the same architecture with fresh weights: every LayerNorm starts "
        "at γ = 1, β = 0, so nothing can be an outlier (the contrast of Godey et al.).",
    )
    k = interval_slider(c2, "k (std from the LN's mean)", LN_K, "ln_k")
    share = interval_slider(c3, "share of LNs that must flag a dim", LN_SHARE, "ln_share")
    return weights, k, share


def model_or_stop(loaded: LoadedModel, weights: str) -> tuple[LoadedModel, list[NormSite]]:
    """The model whose norms the page reads (the trained one, its random-init copy, with its MLM
    head when the checkpoint has one) and those norms; or an error and ``st.stop()``."""
    selection = get_selection()
    source = selection.model_source
    if weights == "random-init copy" and not is_random_like(source):
        source = random_like_source(source)
    try:
        model = loaded if source == selection.model_source else get_model(source=source)
        if mlm_checkpoint(source):
            model = get_model(source=source, head="mlm")
        return model, norm_sites(model)
    except IsoscopeError as exc:
        st.error(f"**No LayerNorm analysis for this model.** {message(exc)}")
        st.stop()
        raise  # st.stop() raises


def detection(
    model: LoadedModel, sites: list[NormSite], k: float, share: float
) -> tuple[LNOutliers, LNParams, LNOutliers]:
    """The norms used for the detection, and the outlier γ / β dims they flag: (found in the
    chosen norms, every norm's parameters, every norm's flags)."""
    roles_present = [r for r in ROLE_LABELS if any(s.role == r for s in sites)]
    if st.session_state.get("ln_norms_for") != model.fingerprint:
        # another model: its LayerNorms differ, so start the norm pickers from that model's defaults
        for widget in ("ln_detect_roles", "ln_ablate_norms"):
            st.session_state.pop(widget, None)
        st.session_state["ln_norms_for"] = model.fingerprint
    detect_roles = st.multiselect(
        "LayerNorms used for detection",
        roles_present,
        default=[r for r in default_roles(sites) if r in roles_present],
        key="ln_detect_roles",
        format_func=lambda r: f"{r} · {ROLE_LABELS[r]}",
        help="Busters look at the output LayerNorm of every layer (post-LN models). Pre-LN models (GPT-2) have "
        "none: their per-layer norms are used instead.",
    )
    if not detect_roles:
        st.error("Choose at least one kind of LayerNorm for the detection.")
        st.stop()
    chosen, found = ln_outliers(model, tuple(detect_roles), k, share)
    all_params, all_found = all_ln_outliers(model, k, share)

    st.subheader("Outlier γ and β")
    m1, m2, m3 = st.columns(3)
    m1.metric("LayerNorm outlier dims", len(found.dims))
    m2.metric("LayerNorms used", f"{len(chosen)} ({', '.join(detect_roles)})")
    m3.metric("must flag a dim in", f"≥ {found.needed} of {len(chosen)}")
    st.markdown(f"**Outlier dims:** {', '.join(map(str, found.dims)) or 'none'}")
    st.markdown(dimension_links(model.info.num_layers // 2, found.dims))
    if model.info.random_init:
        st.info(
            "Random-init weights: every LayerNorm has γ = 1 and β = 0 (zero spread), so no dimension is flagged."
        )
    if found.dims:
        st.dataframe(
            found.table(),
            hide_index=True,
            width="stretch",
            column_config={
                "weight_layers": "γ flagged in # LNs",
                "bias_layers": "β flagged in # LNs",
            },
        )
    return found, all_params, all_found


@fragment
def heatmap_section(
    model: LoadedModel, result: ExtractionResult, k: float, share: float, all_params, all_found,
    found,
) -> None:  # fmt: skip
    """γ / β heatmaps and flag counts (a fragment: the colour scale reruns only this section)."""
    scale = st.radio(
        "Colour",
        ["z-score", "value"],
        horizontal=True,
        key="ln_scale",
        help="z-score: (x - mean) / std within each LayerNorm, the quantity the detector thresholds.",
    )

    def gamma_view() -> None:
        fig_g = param_heatmap(all_params, all_found.weight_flags, "gamma", scale, found.dims)
        chart_with_downloads(
            fig_g,
            key="ln_heat_gamma",
            downloads="ln_gamma",
            frame=all_params.to_frame(),
            name="layernorm_params",
            live=True,
        )

    def beta_view() -> None:
        if not all_params.has_bias.any():
            st.info("These norms are RMSNorms (Llama family): they have a γ and no β.")
            return
        fig_b = param_heatmap(all_params, all_found.bias_flags, "beta", scale, found.dims)
        chart_with_downloads(
            fig_b,
            key="ln_heat_beta",
            downloads="ln_beta",
            frame=all_params.to_frame(),
            name="layernorm_params",
        )

    def counts_view() -> None:
        fig_c = flag_counts_bar(all_found)
        st.plotly_chart(fig_c, width="stretch", key="ln_counts")
        counts = pd.DataFrame(all_found.per_norm_counts())
        st.dataframe(counts, hide_index=True, width="stretch")
        download_buttons(
            "ln_counts",
            fig=fig_c,
            frame=counts,
            json_data={"k": k, "share": share, "norms": found.names, "ln_outliers": found.table()},
            name="layernorm_outliers",
        )

    def overlap_view() -> None:
        """Which LayerNorm outlier dims are also hidden-state outliers, state by state."""
        st.subheader("Overlap with hidden-state outlier dimensions")
        if model.info.random_init:
            st.caption(
                "The hidden-state outliers below are those of the trained model in the sidebar."
            )
        hidden = outlier_dims_by_state(result)
        if result.hidden_size != model.info.hidden_size:
            st.warning("The extraction and the model have different widths; no overlap to show.")
        else:
            fig_o = overlap_figure(found.dims, result.state_names, hidden, result.hidden_size)
            st.plotly_chart(fig_o, width="stretch", key="ln_overlap")
            table_o = overlap_table(found.dims, result.state_names, hidden)
            st.dataframe(table_o, hide_index=True, width="stretch")
            download_buttons(
                "ln_overlap", fig=fig_o, frame=table_o, name="layernorm_hidden_overlap"
            )
        explainer(
            "What is this / references",
            """
Hidden-state outliers come from the foundation's criteria (mean z-score > 3, Timkey & van Schijndel 2021,
arXiv 2109.04404; or the min/max of at least half the tokens, Luo et al. 2021, arXiv 2011.04393) on the current
extraction. A large γ_j or β_j in the LayerNorm that produces a hidden state directly scales dimension j of
that state, so the two often coincide; a LayerNorm can also *remove* a dimension (γ ≈ 0), as MiniLM's last output
LayerNorm does for dims 127, 223 and 319, which then vanish from the final layer.
""",
        )

    # lazy: a k or share change redraws the open tab (and tabs opened before), not all four
    lazy_tabs(
        ["γ (gamma)", "β (beta)", "counts per LayerNorm", "overlap with hidden states"],
        [gamma_view, beta_view, counts_view, overlap_view],
        key="ln_tab",
    )


def criterion_explainer(k: float, share: float) -> None:
    explainer(
        "What is this / references",
        f"""
Per LayerNorm, γ_j (and separately β_j) is **flagged** when it lies more than **k = {k:g}** standard deviations
from that LayerNorm's mean over all dimensions; a dimension is a **LayerNorm outlier** when γ or β is flagged in at
least **{share:.0%}** of the LayerNorms used (circles in the heatmaps; every LayerNorm is shown, only the chosen
kinds count). A fresh LayerNorm (γ = 1, β = 0) has zero spread and flags nothing.
Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, *BERT Busters: Outlier Dimensions that Disrupt Transformers*
(arXiv 2105.06990). Names: `emb.ln` (embedding LN), `L3.attn_ln` / `L3.out_ln` (post-LN: after attention / after
the FFN, producing hidden state 3), `L3.pre_attn_ln` / `L3.pre_mlp_ln` and `final_ln` (pre-LN models such as GPT-2),
`head.ln` (the MLM head).
""",
    )


def ablation_inputs(result: ExtractionResult, count: int):
    """The first ``count`` texts, or images / clips of the sidebar's folder."""
    if result.input_kind == "text":
        return tuple(result.texts[:count])
    return media_corpus_for(result, "ablate on them").head(count)


def ablation_lab(
    model: LoadedModel, result: ExtractionResult, sites: list[NormSite], found: LNOutliers
) -> None:
    """Disable dimensions in chosen norms, against random dimensions (a form, then the report)."""
    st.subheader("Ablation lab: disable dimensions, compare with random dimensions")
    form = ablation_form(result, sites)
    if form.submitted:
        run_ablation_form(model, result, sites, found, form)
    stored = st.session_state.get("ln_report")
    if stored is not None and stored[0] == model.fingerprint:
        ablation_report_view(stored[1], UNITS[result.input_kind])
    ablation_explainer()


@dataclasses.dataclass(frozen=True)
class AblationForm:
    """What the ablation lab's form holds: whether it was just submitted, the dims (the LayerNorm
    outliers, or the typed ones), the norms to ablate, the random controls and the inputs."""

    submitted: bool
    auto_dims: bool
    typed: str
    norms: list[str]
    controls: int
    n_texts: int
    use_sts: bool


def ablation_form(result: ExtractionResult, sites: list[NormSite]) -> AblationForm:
    KIND = result.input_kind  # images / audio: no LM loss, no STS; the final-state cosine instead
    texts_all = list(result.texts)
    UNIT = UNITS[KIND]
    roles_present = [r for r in ROLE_LABELS if any(s.role == r for s in sites)]
    site_names = [s.name for s in sites]
    choices = roles_present + site_names
    with st.form("ln_ablation_form", border=True):
        a1, a2 = st.columns([1, 2])
        dims_mode = a1.radio(
            "Dimensions", ["auto (LayerNorm outliers)", "typed"], key="ln_dims_mode"
        )
        typed = a2.text_input(
            "Typed dims (comma-separated, 0-based)", value="127, 223, 319", key="ln_dims_text"
        )
        ablate_norms = st.multiselect(
            "LayerNorms to ablate (γ_j = β_j = 0)",
            choices,
            default=[r for r in default_roles(sites) if r in roles_present],
            key="ln_ablate_norms",
            help="Default: the output LayerNorm of every layer (Busters). Add 'head' to include the "
            "MLM head's LayerNorm.",
        )
        b1, b2, b3 = st.columns(3)
        n_controls = b1.slider(
            "Random controls (seeds)", 0, 10, RANDOM_CONTROLS.default, key="ln_controls"
        )
        low = 4 if len(texts_all) > 4 else 1  # a small folder (a few images) still gets a slider
        n_texts = b2.slider(
            f"{UNIT} (from the corpus)",
            low,
            max(low + 1, min(320, len(texts_all))),
            min(32, len(texts_all)),
            key="ln_texts",
        )
        if KIND == "text":
            use_sts = b3.checkbox(
                "STS Spearman on the bundled pairs",
                value=False,
                key="ln_sts",
                help="Adds the change in sentence-similarity Spearman (bundled CC0 sample pairs).",
            )
        else:
            use_sts = False
            b3.caption(
                f"No LM loss and no sentence pairs for {MEDIA_NOUN[KIND]}: the end metric is the "
                "final-state cosine (unablated vs ablated mean-pooled final state)."
            )
        run_clicked = st.form_submit_button("Run ablation", type="primary", key="ln_ablation_run")
    return AblationForm(
        run_clicked, dims_mode.startswith("auto"), typed, ablate_norms, n_controls, n_texts, use_sts
    )


def run_ablation_form(
    model: LoadedModel,
    result: ExtractionResult,
    sites: list[NormSite],
    found: LNOutliers,
    form: AblationForm,
) -> None:
    """The ablation the form asks for, kept in the session for this model (or the reason not)."""
    try:
        if form.auto_dims:
            dims = found.dims
            if not dims:
                raise IsoscopeError(
                    "no LayerNorm outlier dims detected at these thresholds; type dims or lower k / share"
                )
        else:
            dims = parse_dims(form.typed, model.info.hidden_size)
        if not form.norms:
            raise IsoscopeError("choose at least one LayerNorm to ablate")
        select_norms(sites, form.norms)  # an unknown name raises before the run
        report = ablation_report(
            model,
            ablation_inputs(result, form.n_texts),
            tuple(dims),
            tuple(form.norms),
            form.controls,
            form.use_sts,
            get_selection().settings.max_length,
        )
        st.session_state["ln_report"] = (model.fingerprint, report)
    except IsoscopeError as exc:
        st.error(message(exc))


def ablation_report_view(report: AblationReport, unit: str) -> None:
    st.caption(
        f"Ablated dims **{', '.join(map(str, report.dims))}** in {', '.join(report.norms)} · "
        f"{report.num_texts} {unit.lower()} · {len(report.controls)} random controls · "
        f"{report.seconds:.1f} s"
    )
    if report.end_metric == "final_state_cosine":
        final_state_metric(report)
    for notice in report.notices:
        st.caption(f"ℹ️ {message(notice)}")
    metrics = available_metrics(report)
    metric = st.selectbox(
        "Effect", metrics, format_func=lambda m: METRIC_LABELS[m], key="ln_metric"
    )
    fig_a = ablation_vs_controls(report, metric)
    st.plotly_chart(fig_a, width="stretch", key="ln_ablation_fig")
    if report.mlm_loss_original is not None:
        st.plotly_chart(mlm_loss_figure(report), width="stretch", key="ln_mlm_fig")
    download_buttons(
        "ln_ablation",
        fig=fig_a,
        frame=report.frame(),
        json_data=report.to_json(),
        name="layernorm_ablation",
    )


def final_state_metric(report: AblationReport) -> None:
    """The end metric of images and audio: unablated vs ablated final-state cosine."""
    final = report.final_state_cosine()
    spread = (
        f"random controls {min(final['controls']):.4f} … {max(final['controls']):.4f}"
        if final["controls"]
        else "no random controls"
    )
    st.metric(
        "final-state cosine (unablated vs ablated, mean-pooled)",
        f"{final['ablation']:.4f}",
        help=f"The end metric without an LM loss or sentence pairs; {spread}.",
    )
    st.caption(f"End metric: final-state cosine {final['ablation']:.4f} vs {spread}.")


def ablation_explainer() -> None:
    explainer(
        "What is this / references",
        """
**Disabling** dimension j sets γ_j = β_j = 0 in the chosen LayerNorms, so they output 0 in dimension j
(done on a private copy of the model; the cached model is never touched). **Controls**: the same number of random
dimensions (not among the ablated ones), one seed each: the grey box and dots. **Effects** per hidden state:
cosine between the original and the ablated mean-pooled sentence embedding (sentence-transformers pooling) and token
vectors, the change in anisotropy (mean cosine of random token pairs from different texts), the change in STS
Spearman on sentence pairs, and with an MLM head the masked-token loss (15 % of non-special tokens masked, fixed seed,
the same masks for every run). Busters report that disabling 2 dims x (γ, β) x 12 layers = 48 parameters of
BERT-base wrecks MLM and GLUE (STS-B −44.1, MNLI −27.9 points) while random dims barely matter
(Kovaleva et al. 2021, arXiv 2105.06990).
""",
    )


def sweep_section(model: LoadedModel, result: ExtractionResult, found: LNOutliers) -> None:
    """Every dimension ablated alone in the default norms."""
    st.subheader("One dimension at a time")
    UNIT = UNITS[result.input_kind]
    s1, s2, s3 = st.columns(3)
    sweep_texts = s1.slider(UNIT, 2, 32, 8, key="ln_sweep_texts")
    sweep_len = s2.select_slider("Max tokens", [16, 32, 48, 64], value=32, key="ln_sweep_len")
    cached_sweep = st.session_state.get("ln_sweep")
    if s3.button("Run sweep over all dims", key="ln_sweep_run", type="primary"):
        try:
            cached_sweep = (
                model.fingerprint,
                dim_sweep(model, ablation_inputs(result, sweep_texts), sweep_len),
            )
            st.session_state["ln_sweep"] = cached_sweep
        except IsoscopeError as exc:
            st.error(message(exc))
    if cached_sweep is not None and cached_sweep[0] == model.fingerprint:
        result_sweep = cached_sweep[1]
        options = ["embedding_drift", "token_drift"] + (
            ["mlm_loss_increase"] if result_sweep.mlm_loss is not None else []
        )
        t1, t2 = st.columns(2)
        sweep_metric = t1.selectbox("Bar height", options, key="ln_sweep_metric")
        state_name = t2.selectbox(
            "Hidden state",
            result_sweep.state_names,
            index=len(result_sweep.state_names) - 1,
            key="ln_sweep_state",
        )
        fig_s = sweep_bar(
            result_sweep, result_sweep.state_names.index(state_name), sweep_metric, found.dims
        )
        st.plotly_chart(fig_s, width="stretch", key="ln_sweep_fig")
        st.caption(
            f"{len(result_sweep.dims)} dims in {result_sweep.seconds:.1f} s ({result_sweep.method}, "
            f"16 ablated copies per forward pass) · LayerNorms: {', '.join(result_sweep.norms)}"
        )
        download_buttons(
            "ln_sweep",
            fig=fig_s,
            frame=result_sweep.frame(result_sweep.state_names.index(state_name)),
            json_data=result_sweep.to_json(),
            name="layernorm_sweep",
        )
    else:
        st.caption(
            "Ablates every dimension alone in the default LayerNorms on a few texts and plots the damage per "
            "dimension. Exact and batched: 16 ablated copies of the texts go through each forward pass."
        )
    explainer(
        "What is this / references",
        """
Each bar is the damage of disabling **one** dimension (γ_j = β_j = 0 in the output LayerNorm of every layer):
1 − cosine between original and ablated sentence embeddings (or token vectors, or the MLM loss increase) at the
chosen hidden state. Timkey & van Schijndel 2021 (*All Bark and No Bite: Rogue Dimensions in Transformer Language
Models Obscure Representational Quality*, arXiv 2109.04404) show that a few "rogue" dimensions dominate cosine
similarity; Busters show that the same few dims matter for the model's function. Red bars are the detected
LayerNorm outlier dims. Results are cached per model, texts and length.
""",
    )


def debate() -> None:
    st.subheader("Sources and the debate")
    explainer(
        "Where do outlier dimensions come from? Four views",
        """
- **LayerNorm parameters (Kovaleva et al. 2021, BERT Busters, arXiv 2105.06990).** Outlier dims show up as
  high-magnitude γ and β of the LayerNorms, at the same dimension across layers, from the *embedding* LayerNorm on;
  disabling them (48 parameters of BERT-base) wrecks the model, random dims do not. The authors argue the
  embedding LayerNorm, not the position embeddings, is where they originate.
- **Position embeddings (Luo, Kulmizev & Mao 2021, arXiv 2011.04393).** The outlier already sits in the
  position-embedding table (BERT's first position vector; RoBERTa dim 588 is the maximum of 99.8 % of position
  vectors) and propagates through the layers; clipping it improves similarity tasks. See the *Positional
  information* page, which shows the embedding LayerNorm next to the position table.
- **Token frequency (Puccetti et al. 2022, *Outlier Dimensions that Disrupt Transformers Are Driven by
  Frequency*, arXiv 2205.11380).** The outliers emerge during pre-training and track how often tokens occur:
  frequent tokens push the LayerNorm parameters of those dims up.
- **Rogue dimensions in similarity (Timkey & van Schijndel 2021, arXiv 2109.04404).** A handful of dimensions
  dominate cosine similarity and anisotropy without carrying much of the model's behaviour for similarity;
  standardisation removes their effect. The sweep above measures exactly that per-dimension influence.

The dashboard takes no side: compare the LayerNorm heatmaps here with the position table on the *Positional
information* page, and the trained weights with the random-init copy (no outliers at all, so they are learned).
""",
        expanded=False,
    )
