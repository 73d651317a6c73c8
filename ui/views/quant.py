"""The "Quantization readiness" page (pages/quant.py): one pass per (model, corpus, texts, max
length), re-evaluated for each K and α; the per-block sensitivity once per pass; then the verdict,
the end metric of every scheme and five lazy tabs."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from backend.analysis.quant.before_after import ChannelProfile, before_after, channel_profile
from backend.analysis.quant.params import (
    ALPHA_GRID,
    IGNORE_SHARE,
    KEEP_K,
    QUANT_MAX_LENGTH,
    SMOOTHQUANT_ALPHA,
)
from backend.analysis.quant.readiness import (
    MagnitudeTiles,
    QuantReport,
    QuantScan,
    evaluate,
    prefix_curve,
    report_from,
    scan_sites,
    site_magnitudes,
)
from backend.analysis.quant.readiness.report import MIN_BOOTSTRAP_TEXTS
from backend.analysis.quant.recipe import Recipe, build_recipe, predict
from backend.analysis.quant.schemes import SCHEME_LABELS
from backend.analysis.quant.sites import ROLE_LABELS, Site
from backend.engine.errors import IsoscopeError
from backend.engine.inputs.corpus import Corpus
from backend.engine.inputs.pairs import SentencePairs, read_pairs_csv, sts_sample
from backend.engine.load.models import LoadedModel, private_copy
from backend.engine.params import massive_rule
from backend.plots.quant import (
    STRIP_QUANTITIES,
    before_after_frame,
    channel_figure,
    heat_strip_figure,
    magnitude_figure,
    moved_figure,
    prefix_figure,
    scheme_figure,
    scheme_frame,
    sensitivity_figure,
    sites_frame,
)
from ui.frame.page import explainer
from ui.frame.tabs import lazy_tabs
from ui.sharing.downloads import download_buttons
from ui.sharing.exports import remember_quant
from ui.widgets.controls import choice_slider, interval_number, interval_slider
from ui.widgets.ranges import QUANT_ALPHA_AUTO, QUANT_PAIRS
from ui.work.cached import cached, heavy
from ui.work.extraction import get_extraction

RAN_KEY = "quant_ran"
RECIPE_ANCHOR = "quant-recipe"  # the recipe section's heading, linked from the verdict


@heavy(
    lambda loaded, *_: f"Recording the projection inputs of {loaded.info.display_name}:", "batches"
)
def quant_scan(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, *, progress
) -> QuantScan:
    """The projection inputs of every site on the first ``n_texts`` texts."""
    return scan_sites(loaded, corpus.texts[:n_texts], max_length=max_length, progress=progress)


@heavy("Quantizing one block at a time:", "steps")
def block_sensitivity(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, _scan: QuantScan, *,
    progress,
) -> list:  # fmt: skip
    """The end metric with one block quantized at a time (once per pass; ``_scan`` is that
    pass's). Fake quantization swaps weights, so it runs on a private copy."""
    copy = private_copy(loaded)
    return evaluate(copy, _scan, schemes=("per_token",), end=False, progress=progress).sensitivity


@heavy("Simulating every scheme:", "schemes")
def scheme_report(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, keep: int,
    alpha: float | None, pairs: SentencePairs | None, _scan: QuantScan, _sensitivity: list, *,
    progress,
) -> QuantReport:  # fmt: skip
    """Errors and end metric for K and α (None: the α sweep's best; with ``pairs``, an encoder's
    STS change per scheme), on a private copy: sessions using the cached model never see the
    swapped weights."""
    copy = private_copy(loaded)
    report = report_from(
        copy, _scan, keep=keep, alpha=alpha, sensitivity=False, pairs=pairs, progress=progress
    )
    return replace(report, sensitivity=_sensitivity)


def get_report(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, keep: int,
    alpha: float | None, pairs: SentencePairs | None = None,
) -> QuantReport:  # fmt: skip
    """The pass, its sensitivity, then the schemes at K and α (None: the sweep's best)."""
    scan = quant_scan(loaded, corpus, n_texts, max_length)
    sens = block_sensitivity(loaded, corpus, n_texts, max_length, scan)
    alpha = None if alpha is None else float(alpha)
    return scheme_report(loaded, corpus, n_texts, max_length, int(keep), alpha, pairs, scan, sens)


@heavy("Quantizing blocks 1..k:", "blocks")
def layer_curve(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, _scan: QuantScan, *,
    progress,
) -> list:  # fmt: skip
    """The end metric with only blocks 1..k quantized per token, for every k, on a private copy."""
    return prefix_curve(private_copy(loaded), _scan, progress=progress)


@heavy("Smoothing and rotating every site:", "sites")
def site_transforms(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, alpha: float,
    _scan: QuantScan, *, progress,
) -> list:  # fmt: skip
    """Every site before and after SmoothQuant (α) and the rotation, on the scan's sample."""
    return before_after(loaded, _scan, alpha=alpha)


@cached
def site_channels(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, index: int,
    transform: str, alpha: float, _scan: QuantScan,
) -> ChannelProfile:  # fmt: skip
    """One site's per-channel activation max and weight range, before and after ``transform``
    (weights read, never swapped: the shared model is fine)."""
    return channel_profile(loaded, _scan, index, transform, alpha=alpha)


@heavy("Predicting the recipe's end metric:", "passes")
def recipe_prediction(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, keep: int, alpha: float,
    ignore_share: float, _report: QuantReport, *, progress,
) -> Recipe:  # fmt: skip
    """The llm-compressor recipe of this report and its predicted end metric (two passes of the
    end texts), on a private copy."""
    copy = private_copy(loaded)
    return predict(copy, _report, build_recipe(copy, _report, ignore_share=ignore_share))


@heavy(lambda loaded, corpus, n_texts, max_length, site: f"Reading {site.name}:", "batches")
def site_tiles(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, site: Site, *, progress
) -> MagnitudeTiles:
    """|x| of every token and channel of one site, max over tiles."""
    return site_magnitudes(
        loaded, corpus.texts[:n_texts], site, max_length=max_length, progress=progress
    )


def choose_pairs() -> SentencePairs | None:
    """The encoder's STS pairs for the quant page: none, the bundled CC0 sample (as on the
    Similarity page when nothing is uploaded) or an uploaded CSV read by the one pairs reader.
    Raises :class:`~backend.engine.errors.InputError` for an unreadable upload."""
    choice = st.selectbox(
        "STS pairs (encoders: the Spearman change per scheme)",
        list(QUANT_PAIRS.options),
        QUANT_PAIRS.index,
        key="quant_pairs",
        help="Sentence pairs with gold scores (sentence1,sentence2,score): each scheme's STS "
        "Spearman × 100 of the mean-pooled final state, against full precision.",
    )
    if choice == QUANT_PAIRS.options[1]:
        return sts_sample()
    if choice == QUANT_PAIRS.options[2]:
        upload = st.file_uploader(
            "Pairs CSV: sentence1,sentence2,score",
            type=["csv", "tsv", "txt"],
            key="quant_pairs_csv",
        )
        return read_pairs_csv(upload.getvalue(), upload.name) if upload is not None else None
    return None


def with_outlier_dims(report: QuantReport) -> QuantReport:
    """The report with the hidden-state outlier dims of the sidebar's extraction."""
    _, result = get_extraction()
    return report.with_outlier_dims(result)


def explain() -> None:
    explainer(
        "What is this / references",
        """
Most people who look at a checkpoint's outliers want to know one thing: **will it survive 8-bit or
4-bit inference, and which layers will hurt?** This page records the input of every projection
(`nn.Linear`, GPT-2's `Conv1D`) inside the blocks, found from the model itself: the inputs q/k/v (or
gate/up) share are one **site**, named by every module it feeds (as SmoothQuant's `act_scales` key
them). Per site, over the corpus's tokens: the per-channel max |x| (exactly `act_scales`), max and median
|x|, the **kurtosis** (4th standardised moment; a Gaussian gives 3) and the share of |x| ≥ 6.

It then **simulates** each scheme, symmetric absmax (scale = max / 127, round, clamp), weights per output
channel: activations per tensor (static, the corpus max) or per token; **keep-K** (LLM.int8's
decomposition: the K channels with the largest max |x| stay in full precision); **SmoothQuant**
(s_j = max|X_j|^α / max|W_j|^(1−α), X/s and W·s); a **Hadamard rotation** (x H, W H, exact in full
precision, QuaRot-style); and **weight-only int4** (groups of 128). The error of a site is
‖Y_q − Y‖_F / ‖Y‖_F with Y = x Wᵀ. Finally it **measures** what the model loses with every site
fake-quantized: the mean next-token KL(p_full ‖ p_quant) for decoders, the cosine of the mean-pooled
final state for encoders (with sentence pairs chosen below, also the STS Spearman × 100 of that state
in full precision and per scheme, scored as on the Similarity page), and the same with one block at a
time. Once this page has run, the Overview's report download adds a "Quantization readiness" section.

**Sources**
- Dettmers, Lewis, Belkada & Zettlemoyer 2022, *LLM.int8(): 8-bit Matrix Multiplication for Transformers
  at Scale*, [arXiv 2208.07339](https://arxiv.org/abs/2208.07339)
- Xiao, Lin, Seznec, Wu, Demouth & Han 2023, *SmoothQuant: Accurate and Efficient Post-Training
  Quantization for Large Language Models*, [arXiv 2211.10438](https://arxiv.org/abs/2211.10438)
  (code: mit-han-lab/smoothquant)
- Ashkboos et al. 2024, *QuaRot: Outlier-Free 4-Bit Inference in Rotated LLMs*, [arXiv
  2404.00456](https://arxiv.org/abs/2404.00456)
- Bondarenko, Nagel & Blankevoort 2023, *Quantizable Transformers: Removing Outliers by Helping Attention
  Heads Do Nothing*, [arXiv 2306.12929](https://arxiv.org/abs/2306.12929)
- Yang et al. 2024, *Mitigating Quantization Errors Due to Activation Spikes in GLU-Based LLMs*, [arXiv
  2405.14428](https://arxiv.org/abs/2405.14428)
""",
    )


def controls(corpus: Corpus) -> tuple[int, int, int, float | None]:
    """(texts, max tokens per text, keep K, SmoothQuant α or None: the sweep chooses it)."""
    c1, c2, c3, c4 = st.columns(4)
    n_max = len(corpus.texts)
    n_texts = int(
        c1.slider(
            "Texts", 1, n_max, min(64, n_max), key="quant_n_texts", help="The corpus's first texts."
        )
    )
    max_length = int(choice_slider(c2, "Max tokens per text", QUANT_MAX_LENGTH, "quant_max_length"))
    keep = int(
        interval_number(
            c3,
            "Keep K channels",
            KEEP_K,
            "quant_keep",
            help="keep-K (LLM.int8): the K input channels with the largest max |x| stay in full precision",
        )
    )
    auto = c4.toggle(
        "Choose α by the sweep",
        QUANT_ALPHA_AUTO.default,
        key="quant_alpha_auto",
        help="SmoothQuant's α with the lowest mean per-site error over "
        + ", ".join(f"{a:g}" for a in ALPHA_GRID)
        + " on the same scan; off: the slider's α",
    )
    alpha = float(
        interval_slider(
            c4,
            "SmoothQuant α",
            SMOOTHQUANT_ALPHA,
            "quant_alpha",
            disabled=auto,
            help="migration strength: how much of the activations' range moves into the weights",
        )
    )
    return n_texts, max_length, keep, None if auto else alpha


def pairs_or_none(loaded: LoadedModel) -> SentencePairs | None:
    """An encoder's STS pairs (decoders' end metric is the next-token KL)."""
    if loaded.info.is_causal:
        return None
    try:
        return choose_pairs()
    except IsoscopeError as exc:
        st.error(f"**Cannot read the pairs file.** {exc}")
        return None


def report_or_stop(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, keep: int, alpha: float,
    pairs: SentencePairs | None,
) -> QuantReport:  # fmt: skip
    """The analysis, once its button was pressed for this pass (then kept for the session)."""
    run = (loaded.fingerprint, corpus.sha, n_texts, max_length)  # the pass the button ran
    ran = st.session_state.setdefault(RAN_KEY, [])
    if run not in ran:
        st.info(
            f"The analysis runs {loaded.info.display_name} over {n_texts} texts once, then simulates six "
            "schemes and one block at a time: from seconds (small models) to a minute or more."
        )
        if not st.button("Run the quantization analysis", key="quant_run", type="primary"):
            st.stop()
        ran.append(run)
    try:
        report = get_report(loaded, corpus, n_texts, max_length, keep, alpha, pairs)
        remember_quant(loaded, corpus, report)  # the Overview's report download adds its section
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this model.** {exc}")
        st.stop()
    return report


def summary(loaded: LoadedModel, report: QuantReport, pairs: SentencePairs | None) -> None:
    """The scan's notes, the verdict, the end metric of each scheme and what it ran on."""
    keep = report.keep
    scan = report.scan
    for note in scan.notes:
        st.caption(f"ℹ️ {note}")

    recipe_link = f" [The decision and its recipe ↓](#{RECIPE_ANCHOR})" if report.end else ""
    st.markdown(f"**Verdict.** {report.verdict()}{recipe_link}")
    if report.end is not None:
        m = st.columns(4)
        fmt = (lambda v: f"{v:.3g}") if report.metric == "kl" else (lambda v: f"{v:.5f}")
        label = "KL" if report.metric == "kl" else "cosine"
        m[0].metric(f"{label}, W8A8 per token", fmt(report.end["per_token"]))
        m[1].metric(f"{label}, keep {keep}", fmt(report.end["keep_k"]))
        m[2].metric(f"{label}, SmoothQuant", fmt(report.end["smoothquant"]))
        m[3].metric(f"{label}, rotation", fmt(report.end["rotation"]))
        if report.interval:
            shown = ("per_token", "keep_k", "smoothquant", "rotation")
            st.caption(
                "95% intervals (bootstrap over the end texts): "
                + "; ".join(
                    f"{SCHEME_LABELS[k]} {fmt(report.interval[k][0])} – {fmt(report.interval[k][1])}"
                    for k in shown
                )
                + "."
            )
            close = [(a, b) for a, b in report.overlapping() if a in shown and b in shown]
            if scan.end_ids.shape[0] < MIN_BOOTSTRAP_TEXTS:
                st.caption(
                    f"⚠️ Only {scan.end_ids.shape[0]} end text(s): too few for these intervals to "
                    "mean much; a corpus of more, shorter texts (or more end tokens) helps."
                )
            elif close:
                st.caption(
                    "⚠️ Overlapping intervals, so these orders are not settled on these texts: "
                    + "; ".join(f"{SCHEME_LABELS[a]} vs {SCHEME_LABELS[b]}" for a, b in close)
                    + ". More end texts (a longer corpus) narrow them."
                )
        sts = report.end.get("sts_spearman")
        if sts:
            change = report.end["sts_spearman_change"]
            cols = st.columns(4)
            cols[0].metric("STS Spearman × 100, full precision", f"{sts['full_precision']:.1f}")
            for col, k in zip(cols[1:], ("per_token", "keep_k", "rotation"), strict=True):
                col.metric(f"STS, {SCHEME_LABELS[k]}", f"{sts[k]:.1f}", f"{change[k]:+.1f}")
            st.caption(f"STS on {len(pairs):,} pairs from {pairs.name}.")
    st.caption(
        f"{loaded.info.display_name} · {scan.n_texts:,} texts · {scan.n_tokens:,} tokens · "
        f"{len(scan.sites)} sites · site errors and medians on a seeded sample of {scan.error_tokens:,} "
        f"tokens · end metric on the first {scan.end_ids.shape[0]} texts ({scan.end_tokens:,} tokens) · "
        f"pass {scan.seconds:.1f} s"
    )


def recipe_section(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    """The decision (scheme, modules kept, α, rotation) with its numbers, and the llm-compressor
    recipe that carries it out (``isoscope quant --recipe`` writes the same file)."""
    if report.end is None:
        return
    st.subheader("Decision and recipe", anchor=RECIPE_ANCHOR)
    share = interval_slider(
        st,
        "Recipe: keep the most sensitive blocks in full precision until they make up this share "
        "of the summed per-block loss",
        IGNORE_SHARE,
        "quant_ignore_share",
    )
    try:
        recipe = recipe_prediction(
            loaded, corpus, n_texts, max_length, report.keep, report.alpha, float(share), report
        )
    except IsoscopeError as exc:
        st.error(f"**No recipe for this model.** {exc}")
        return
    st.markdown(f"**{recipe.decision()}** The recipe below carries it out.")
    for note in recipe.notes:
        st.caption(f"ℹ️ {note}")
    cols = st.columns(3)
    cols[0].download_button(
        "llm-compressor recipe (YAML)",
        data=recipe.yaml(),
        file_name="recipe.yaml",
        mime="application/x-yaml",
        key="dl_yaml_quant_recipe",
        on_click="ignore",
        icon=":material/download:",
    )
    download_buttons("quant_recipe", json_data=recipe.to_dict(), name="quant_recipe")
    st.caption(
        'Run it with llm-compressor: `oneshot(model=..., dataset=..., recipe="recipe.yaml")` '
        '(pip install "isoscope[quant]"). The JSON holds the same decisions for other toolchains.'
    )


def strip_tab(report: QuantReport) -> None:
    st.subheader("Layers × role")
    quantity = st.selectbox(
        "Quantity",
        list(STRIP_QUANTITIES),
        format_func=lambda k: STRIP_QUANTITIES[k][0],
        key="quant_strip",
    )
    fig = heat_strip_figure(report, quantity)
    st.plotly_chart(fig, width="stretch", key="quant_strip_chart")
    download_buttons("quant_strip", fig=fig, name=f"quant_{quantity.replace(':', '_')}")
    explainer(
        "How to read it",
        """
One cell per site: block (x) and role (y): the input of the attention projections (q/k/v), of the
attention output projection, of the MLP's input projections (gate/up or fc1) and of its output projection
(down/fc2). Roles come from the order in which the block runs its projections and from which of them read a
norm's output. **max/median** finds activation spikes (Yang et al. 2024: often the first and last blocks'
down-projections); **kurtosis** (Bondarenko et al. 2023) grows with outlier channels; the error rows are the
simulated relative output error of each scheme at that site.
""",
    )


def tokens_tab(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    scan = report.scan
    st.subheader("Token × channel magnitudes")
    names = [site_name(s) for s in scan.sites]
    worst = max(range(len(scan.sites)), key=lambda i: scan.sites[i].max_over_median)
    index = st.selectbox(
        "Site", range(len(names)), index=worst, format_func=lambda i: names[i], key="quant_site"
    )
    try:
        tiles = site_tiles(loaded, corpus, n_texts, max_length, scan.sites[int(index)].site)
    except IsoscopeError as exc:
        st.error(str(exc))
        return
    fig = magnitude_figure(tiles)
    st.plotly_chart(fig, width="stretch", key="quant_tiles_chart")
    site = scan.sites[int(index)]
    st.markdown(
        "Top channels by max |x|: "
        + ", ".join(f"**{t['channel']}** ({t['max_abs']:.3g})" for t in site.top(6))
    )
    download_buttons("quant_tiles", fig=fig, name="quant_token_channel")
    explainer(
        "How to read it",
        """
The figure SmoothQuant's users ask for: |x| of every token (rows, in corpus order) and input channel
(columns) of one site. Thousands of tokens would not fit a plot, so each cell is the **max** over a tile of
consecutive tokens and channels: a spike stays visible however small it is. Outlier channels show as
bright columns (what per-channel smoothing, keep-K and rotations address); a bright row is a token with
huge values (the first token, a delimiter), which is what per-token scales address.
""",
    )


def schemes_tab(report: QuantReport) -> None:
    scan, keep, alpha = report.scan, report.keep, report.alpha
    st.subheader("Schemes")
    fig = scheme_figure(report)
    st.plotly_chart(fig, width="stretch", key="quant_schemes_chart")
    frame = scheme_frame(report)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons("quant_schemes", fig=fig, frame=frame, name="quant_schemes")
    explainer(
        "How to read it",
        f"""
Left: what the model loses with **every** site fake-quantized, measured end to end on the first
{scan.end_ids.shape[0]} texts (decoders: mean next-token KL against the full-precision model; encoders:
1 − cosine of the mean-pooled final state). Right: the simulated per-site error, averaged over sites.
Static per-tensor scales break first (one spike sets the scale of every token); per-token scales, keeping
{keep} channels, SmoothQuant (α = {alpha:g}) and the rotation each attack outliers differently.
""",
    )


def before_after_tab(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    st.subheader("Before / after")
    transform = st.radio(
        "Transform",
        ["smoothquant", "rotation"],
        format_func=lambda k: (
            SCHEME_LABELS[k] + (f" (α = {report.alpha:g})" if k == "smoothquant" else "")
        ),
        horizontal=True,
        key="quant_transform",
    )
    stats = site_transforms(loaded, corpus, n_texts, max_length, report.alpha, report.scan)
    fig = moved_figure(report, stats, transform)
    st.plotly_chart(fig, width="stretch", key="quant_moved_chart")
    frame = before_after_frame(report, stats)
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons("quant_before_after", fig=fig, frame=frame, name="quant_before_after")
    channels_view(loaded, corpus, report, n_texts, max_length, transform)
    explainer(
        "How to read it",
        """
Each site's per-token int8 error of the **input** (blue) and per-channel int8 error of the **weight**
(red), before (dotted) and after the transform (solid), on the scan's token sample, in full precision
otherwise. SmoothQuant divides input channel j by s_j = max|X_j|^α / max|W_j|^(1-α) and multiplies the
weight's column j by it (Xiao et al. 2023, arXiv 2211.10438): the activation's outliers move into the
weight. Where the red line ends above the blue one, the weight side is now the hard one (lower α). The
rotation (QuaRot, Ashkboos et al. 2024, arXiv 2404.00456) spreads outliers over all channels of both.
The table adds max / median |x|, kurtosis, the share of |x| >= 6 and the weight's column max / median.
""",
    )


def channels_view(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int,
    transform: str,
) -> None:  # fmt: skip
    """Per channel of one site: the activation max |x| and the weight range, before and after."""
    scan = report.scan
    names = [site_name(s) for s in scan.sites]
    worst = max(range(len(scan.sites)), key=lambda i: scan.sites[i].max_over_median)
    index = int(
        st.selectbox(
            "Site, per channel",
            range(len(names)),
            index=worst,
            format_func=lambda i: names[i],
            key="quant_channel_site",
        )
    )
    profile = site_channels(
        loaded, corpus, n_texts, max_length, index, transform, report.alpha, scan
    )
    fig = channel_figure(profile)
    st.plotly_chart(fig, width="stretch", key="quant_channel_chart")
    download_buttons("quant_channels", fig=fig, name="quant_channels")
    explainer(
        "How to read it (per channel)",
        """
One dot per input channel of the chosen site (the most spiky one by default): top, the largest |x| of
that channel over the scan's token sample; bottom, the weight's range in that input column (max |W| over
every projection the site feeds). Grey is before, colour after. SmoothQuant divides channel j's
activations by s_j and multiplies the weight's column j by it, so the outlier channels drop on top and the
same columns rise below (Xiao et al. 2023, arXiv 2211.10438, fig. 4). The Hadamard rotation mixes
channels: both panels flatten (Ashkboos et al. 2024, arXiv 2404.00456; Tseng et al. 2024, QuIP#, arXiv
2402.04396).
""",
    )


def site_name(s) -> str:
    return f"{s.site.layer} · {ROLE_LABELS[s.site.role]} · {s.site.modules[0]}"


def sensitivity_tab(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    st.subheader("Layer sensitivity")
    if not report.sensitivity:
        st.info("No sensitivity for this model.")
        return
    fig = sensitivity_figure(report)
    st.plotly_chart(fig, width="stretch", key="quant_sensitivity_chart")
    download_buttons(
        "quant_sensitivity",
        fig=fig,
        json_data=report.sensitivity,
        name="quant_sensitivity",
    )
    if report.end is not None and st.toggle(
        "Layer-wise curve: only blocks 1..k quantized (one pass of the end texts per block)",
        key="quant_prefix",
    ):
        curve = layer_curve(loaded, corpus, n_texts, max_length, report.scan)
        curve_fig = prefix_figure(report, curve)
        st.plotly_chart(curve_fig, width="stretch", key="quant_prefix_chart")
        download_buttons("quant_prefix", fig=curve_fig, json_data=curve, name="quant_layerwise")
    explainer(
        "How to read it",
        """
Bars: the end metric with **only that block** quantized (W8A8 per token), every other block in full
precision. Line: the block's mean simulated per-site error. The Spearman correlation in the title says
whether the cheap per-site proxy ranks the blocks as the measurement does; where it is low, trust the bars.
""",
    )


def table_tab(loaded: LoadedModel, corpus: Corpus, report: QuantReport) -> None:
    scan = report.scan
    st.subheader("Every site")
    shown = report
    if st.toggle(
        "Overlap with the hidden-state outlier dims (runs the sidebar's extraction)",
        key="quant_outliers",
    ):
        try:
            shown = with_outlier_dims(report)
        except IsoscopeError as exc:
            st.error(str(exc))
    frame = sites_frame(shown)
    rows = shown.site_rows()
    frame["outlier overlap"] = [
        "" if r["outlier_overlap"] is None else ", ".join(map(str, r["outlier_overlap"]))
        for r in rows
    ]
    frame["massive overlap"] = [
        "" if r["massive_overlap"] is None else ", ".join(map(str, r["massive_overlap"]))
        for r in rows
    ]
    st.dataframe(frame, hide_index=True, width="stretch")
    st.caption(
        f"Massive-activation dims of the residual stream ({massive_rule()}): "
        + (", ".join(map(str, scan.massive_dims)) or "none")
        + f". Scheme columns: {', '.join(SCHEME_LABELS.values())}."
    )
    payload = shown.to_dict(
        model=loaded.info.to_dict(), corpus={"name": corpus.name, "sha": corpus.sha}
    )
    download_buttons("quant_sites", frame=frame, json_data=payload, name="quant")


def tabs(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    lazy_tabs(
        ["Layers × role", "Token × channel", "Schemes", "Sensitivity", "Before / after", "Sites"],
        (
            lambda: strip_tab(report),
            lambda: tokens_tab(loaded, corpus, report, n_texts, max_length),
            lambda: schemes_tab(report),
            lambda: sensitivity_tab(loaded, corpus, report, n_texts, max_length),
            lambda: before_after_tab(loaded, corpus, report, n_texts, max_length),
            lambda: table_tab(loaded, corpus, report),
        ),
        key="quant_tab",
    )
