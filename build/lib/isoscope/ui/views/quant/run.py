"""The opening of the Quantization readiness page: its explainer, controls (texts, max length, K, α)
and an encoder's STS pairs, then the analysis behind the run button: one pass per (model, corpus,
texts, max length), the per-block sensitivity once per pass, the schemes re-evaluated for each K
and α."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from isoscope.analysis.quant.params import ALPHA_GRID, KEEP_K, QUANT_MAX_LENGTH, SMOOTHQUANT_ALPHA
from isoscope.analysis.quant.readiness import (
    QuantReport,
    QuantScan,
    evaluate,
    report_from,
    scan_sites,
)
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.inputs.pairs import SentencePairs, read_pairs_csv, sts_sample
from isoscope.engine.load.models import LoadedModel, private_copy
from isoscope.ui.frame.literal import literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.exports import remember_quant
from isoscope.ui.widgets.controls import choice_slider, interval_number, interval_slider
from isoscope.ui.widgets.ranges import QUANT_ALPHA_AUTO, QUANT_PAIRS
from isoscope.ui.widgets.upload import file_upload
from isoscope.ui.work.cached import heavy

RAN_KEY = "quant_ran"


@heavy(
    lambda loaded, *_: f"Recording the projection inputs of {literal(loaded.info.display_name)}:",
    "batches",
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


def choose_pairs() -> SentencePairs | None:
    """The encoder's STS pairs for the quant page: none, the bundled CC0 sample (as on the
    Similarity page when nothing is uploaded) or an uploaded CSV read by the one pairs reader.
    Raises :class:`~isoscope.engine.errors.InputError` for an unreadable upload."""
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
        upload = file_upload(
            "Pairs CSV: sentence1,sentence2,score",
            type=["csv", "tsv", "txt"],
            key="quant_pairs_csv",
        )
        return read_pairs_csv(upload.getvalue(), upload.name) if upload is not None else None
    return None


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
        st.error(f"**Cannot read the pairs file.** {message(exc)}")
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
            f"The analysis runs {literal(loaded.info.display_name)} over {n_texts} texts once, then simulates six "
            "schemes and one block at a time: from seconds (small models) to a minute or more."
        )
        if not st.button("Run the quantization analysis", key="quant_run", type="primary"):
            st.stop()
        ran.append(run)
    try:
        report = get_report(loaded, corpus, n_texts, max_length, keep, alpha, pairs)
        remember_quant(loaded, corpus, report)  # the Overview's report download adds its section
    except IsoscopeError as exc:
        st.error(f"**Cannot analyse this model.** {message(exc)}")
        st.stop()
    return report
