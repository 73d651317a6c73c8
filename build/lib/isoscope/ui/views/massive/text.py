"""The "Massive activations & sinks" page (pages/massive.py) for text models: huge activations in
the residual stream (Sun et al. 2024), attention sinks on the first token (Xiao et al. 2023; Gu et
al. 2024) and LLM.int8-style outlier features (Dettmers et al. 2022), one pass per setting. Image
models get ui/views/massive/media.py."""

from __future__ import annotations

import streamlit as st

from isoscope.analysis.massive.int8 import SITE_SHARE, TOKEN_SHARE
from isoscope.analysis.massive.magnitudes import TextMagnitudes, text_magnitudes
from isoscope.analysis.massive.massive import peak_state
from isoscope.analysis.massive.params import MASSIVE_MAX_LENGTH
from isoscope.analysis.massive.scan import MassiveScan, scan_massive
from isoscope.analysis.massive.sinks import SINK_THRESHOLD
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import (
    LLM_INT8_THRESHOLD,
    MASSIVE_ABS_THRESHOLD,
    MASSIVE_MEDIAN_RATIO,
    percent,
)
from isoscope.plots.massive import (
    feature_token_figure,
    inner_frame,
    int8_figure,
    int8_frame,
    layer_position_figure,
    magnitudes_by_layer_figure,
    massive_frame,
    sink_frame,
    sink_heatmap_figure,
    sink_share_figure,
    top_dims_frame,
)
from isoscope.ui.frame.literal import code, literal, message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.sharing.links import dimension_links
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import choice_slider
from isoscope.ui.work.cached import cached, heavy
from isoscope.ui.work.models import get_model


@heavy(lambda loaded, *_: f"Scanning {literal(loaded.info.display_name)}:", "texts")
def massive_scan(
    loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int, *, progress
) -> MassiveScan:
    """Massive activations, sinks and int8 features of ``loaded`` on the first ``n_texts`` texts
    of ``corpus``."""
    texts = corpus.texts[:n_texts]
    return scan_massive(loaded, texts, max_length=max_length, progress=progress)


@cached
def text_view(loaded: LoadedModel, text: str, max_length: int) -> TextMagnitudes:
    """|h| of every hidden state, position and dim of one text."""
    return text_magnitudes(loaded, text, max_length)


def explain() -> None:
    explainer(
        "What is this / references",
        f"""
Decoder LLMs carry a few **massive activations** in their residual stream: single values of the hidden states
with |h| > {MASSIVE_ABS_THRESHOLD:g} and about {MASSIVE_MEDIAN_RATIO:g} × the median |h|, in a few fixed
dimensions, on the first token and on delimiters such as "." or "\\n". They appear after the first few layers,
stay nearly constant until the last ones, and work as fixed biases: the attention to the tokens that carry
them becomes an **attention sink**. They are a different thing from the rogue dimensions of encoders (a
shifted *mean* over all tokens, see the Outlier page): averaged over a corpus, a massive activation on one
token per text still dominates the mean of its dim, which is why the Outlier page flags it. Switch on *exclude
the first position* in the sidebar to study the geometry of the ordinary tokens; this page always includes
every position.

**Sources**
- Sun, Chen, Kolter & Liu 2024, *Massive Activations in Large Language Models*, [arXiv
  2402.17762](https://arxiv.org/abs/2402.17762) (code: locuslab/massive-activations)
- Xiao, Tian, Chen, Han & Lewis 2023, *Efficient Streaming Language Models with Attention Sinks*, [arXiv 2309.17453](https://arxiv.org/abs/2309.17453)
- Gu et al. 2024, *When Attention Sink Emerges in Language Models: An Empirical View*, [arXiv 2410.10781](https://arxiv.org/abs/2410.10781)
- Dettmers, Lewis, Belkada & Zettlemoyer 2022, *LLM.int8(): 8-bit Matrix Multiplication for Transformers at
  Scale*, [arXiv 2208.07339](https://arxiv.org/abs/2208.07339)
- Bondarenko, Nagel & Blankevoort 2023, *Quantizable Transformers: Removing Outliers by Helping Attention
  Heads Do Nothing*, [arXiv 2306.12929](https://arxiv.org/abs/2306.12929)
""",
    )


def scan_controls(corpus: Corpus) -> tuple[int, int]:
    """(texts, max tokens per text) of the scan."""
    c1, c2 = st.columns(2)
    n_max = len(corpus.texts)
    n_texts = c1.slider(
        "Texts to scan",
        1,
        n_max,
        min(64, n_max),
        key="massive_n_texts",
        help="The first texts of the corpus. One pass with eager attention (needed for the attention "
        "weights), so it is slower than the hidden-state extraction.",
    )
    max_length = choice_slider(c2, "Max tokens per text", MASSIVE_MAX_LENGTH, "massive_max_length")
    return int(n_texts), int(max_length)


def scan_or_stop(loaded: LoadedModel, corpus: Corpus, n_texts: int, max_length: int) -> MassiveScan:
    try:
        return massive_scan(loaded, corpus, n_texts, max_length)
    except IsoscopeError as exc:
        st.error(f"**Cannot scan this model.** {message(exc)}")
        st.stop()
        raise  # st.stop() raises


def headline(loaded: LoadedModel, scan: MassiveScan) -> None:
    """The scan's notes, its four numbers and what it ran on."""
    for note in scan.notes:
        st.caption(f"ℹ️ {message(note)}")
    massive = scan.massive
    peak = peak_state(massive)

    m1, m2, m3, m4 = st.columns(4)
    m1.metric(
        "Largest |h|",
        f"{massive.top_value[peak, 0]:,.0f}",
        help=f"hidden state {massive.state_names[peak]}, dim {massive.top_dim[peak, 0]}, position "
        f"{massive.top_position[peak, 0]} ({massive.top_token[peak, 0]})",
    )
    m2.metric("× median |h| there", f"{massive.ratio[peak]:,.0f}")
    m3.metric(
        f"Sink share (alpha > {SINK_THRESHOLD:g})", f"{scan.sinks.share:.0%}" if scan.sinks else "—"
    )
    m4.metric("int8 outlier features", str(len(scan.int8.outlier_features)) if scan.int8 else "—")
    st.caption(
        f"{literal(loaded.info.display_name)} · {scan.n_texts:,} texts · {scan.n_tokens:,} tokens (first position "
        f"included) · max {scan.max_length} tokens per text · {scan.seconds:.1f} s"
    )


# ----------------------------------------------------------------------------- per hidden state
def layers_tab(scan: MassiveScan) -> None:
    """Massive activations per hidden state (Sun et al. 2024, Figure 2)."""
    massive = scan.massive
    peak = peak_state(massive)
    st.subheader("Massive activations per hidden state")
    st.markdown(
        f"The largest |h| is **{massive.top_value[peak, 0]:,.1f}** at hidden state "
        f"**{massive.state_names[peak]}**, dim **{massive.top_dim[peak, 0]}**, position "
        f"**{massive.top_position[peak, 0]}** (token {code(massive.top_token[peak, 0])}): "
        f"**{massive.ratio[peak]:,.0f} ×** the median |h| of that state."
    )
    fig_layers = magnitudes_by_layer_figure(massive)
    st.plotly_chart(fig_layers, width="stretch", key="massive_layers_chart")
    frame = massive_frame(massive)
    st.dataframe(frame, hide_index=True, width="stretch")
    st.markdown(dimension_links(peak, dict.fromkeys(int(d) for d in massive.top_dim[peak])))
    download_buttons(
        "massive_layers",
        fig=fig_layers,
        frame=frame,
        json_data=massive.layers(),
        name="massive_activations",
    )
    explainer(
        "How to read it",
        f"""
Per hidden state (`emb`, 1 … L) over every token of the scanned texts: the three largest |h| (any token, any
dim) and the median |h|, as in Sun et al.'s Figure 2. An activation is **massive** when
|h| > {MASSIVE_ABS_THRESHOLD:g} and |h| > {MASSIVE_MEDIAN_RATIO:g} × the median; the table counts them and says who
carries them: the **first position** of a text, a **delimiter** (punctuation or newline token) or another
token. The median comes from a histogram of log10 |h| with 200 bins per decade (error below 1.2 %).
transformers returns the *last* hidden state after the final norm, which is why the massive values vanish
there.
""",
    )


# ----------------------------------------------------------------------------- one text
def text_tab(corpus: Corpus, max_length: int) -> None:
    """One text: |h| per position and layer, and every dim at one hidden state."""
    st.subheader("One text")
    default_text = corpus.texts[0] if corpus.texts else "Summer is warm. Winter is cold."
    text = st.text_input("Text", default_text, key="massive_text")
    try:
        view = text_view(get_model(), text, int(max_length))
    except IsoscopeError as exc:
        st.error(message(exc))
        return
    fig_pos = layer_position_figure(view)
    chart_with_downloads(
        fig_pos,
        key="massive_positions_chart",
        downloads="massive_positions",
        name="massive_layers_by_positions",
    )
    text_peak = int(view.peak.max(axis=1).argmax())
    state_name = st.select_slider(
        "Hidden state for the feature × token view",
        list(view.state_names),
        value=view.state_names[text_peak],
        key="massive_state",
    )
    state = list(view.state_names).index(state_name)
    fig_3d = feature_token_figure(view, state)
    st.plotly_chart(fig_3d, width="stretch", key="massive_3d_chart")
    dims_frame = top_dims_frame(view, state)
    st.dataframe(dims_frame, hide_index=True, width="stretch")
    download_buttons("massive_3d", frame=dims_frame, name=f"massive_text_state_{state_name}")
    explainer(
        "How to read it",
        """
Top: the largest |h| of every position in every hidden state (log colour; hover for the dim). Massive
activations show as a bright column at the first token (and at delimiters) from a few layers in.
Bottom: |h| of every dim of every token at one hidden state, drawn like Sun et al.'s Figure 1: a few
spikes in the same dims over the first token, the rest flat. The table lists the text's largest dims.
""",
    )


# ----------------------------------------------------------------------------- sinks
def sinks_tab(scan: MassiveScan) -> None:
    """Attention sinks: each head's attention on the first token (Gu et al. 2024)."""
    st.subheader("Attention sinks")
    if scan.sinks is None:
        why = [n for n in scan.notes if n.startswith("attention sinks skipped")]
        st.info(
            message(why[0])
            if why
            else "This model returned no attention weights, so there is no sink analysis."
        )
    else:
        sinks = scan.sinks
        if sinks.other_layers:
            st.caption(
                "Softmax-attention layers only; the others: "
                + ", ".join(f"{literal(k)} ({literal(v)})" for k, v in sinks.other_layers.items())
            )
        st.markdown(
            f"**{sinks.share:.0%}** of the {sinks.alpha.size} (layer, head) pairs put more than "
            f"{sinks.threshold} of their attention on the first token, on average over queries and texts."
        )
        fig_share = sink_share_figure(sinks)
        st.plotly_chart(fig_share, width="stretch", key="sink_share_chart")
        fig_alpha = sink_heatmap_figure(sinks)
        chart_with_downloads(
            fig_alpha,
            key="sink_alpha_chart",
            downloads="sinks",
            frame=sink_frame(sinks),
            json_data=sinks.to_dict(),
            name="attention_sinks",
        )
    explainer(
        "How to read it",
        """
alpha (Gu et al. 2024) is the attention a head pays to the first token, averaged over every query of a text
(alpha_k = 1/(T−k+1) Σ_{i≥k} A_{i,k} with k the first token), then over texts. The **sink share** is the
fraction of heads with alpha > """
        + f"{SINK_THRESHOLD:g}"
        + """ (reported: LLaMA-2-7B about 92 %, Mistral-7B about 97 %). Caveat on
short texts: a causal head that spreads its attention evenly already gives alpha = H_T / T (the harmonic
number over T), 0.31 at T = 9 but 0.05 at T = 128, so scan texts of some length. Encoders are measured the
same way (attention to [CLS]). Attention weights need transformers' eager attention, used for this pass
only.
""",
    )


# ----------------------------------------------------------------------------- int8
def int8_tab(scan: MassiveScan) -> None:
    """LLM.int8-style outlier features (Dettmers et al. 2022)."""
    st.subheader("LLM.int8-style outlier features")
    if scan.int8 is None:
        st.info("This model has no per-layer norms to read the projection inputs from.")
    else:
        int8 = scan.int8
        st.markdown(f"**Verdict:** {int8.verdict()}")
        st.markdown(dimension_links(peak_state(scan.massive), int8.outlier_features))
        fig_int8 = int8_figure(int8)
        chart_with_downloads(
            fig_int8,
            key="int8_chart",
            downloads="int8",
            frame=int8_frame(int8),
            json_data=int8.to_dict(),
            name="int8_outlier_features",
        )
    if scan.inner is not None:
        st.markdown(
            "**Inside the mixers**: norms within a mixer (gated ones included) and the SSM input "
            "and out_proj input of Mamba / Mamba-2 mixers (Quamba, MambaQuant), each in its own "
            "channels."
        )
        st.dataframe(inner_frame(scan.inner), hide_index=True)
    explainer(
        "How to read it",
        f"""
Dettmers et al. (2022) call a hidden dimension an **outlier feature** when its magnitude is
≥ {LLM_INT8_THRESHOLD:g} in at least {percent(SITE_SHARE)} of the layers and at least {percent(TOKEN_SHARE)} of the
sequence positions, measured at the inputs of the attention and FFN projections. Here the sites are the
outputs of each layer's two norms; a dim *counts* at a site when |x| ≥ {LLM_INT8_THRESHOLD:g} on
≥ {percent(TOKEN_SHARE)} of the tokens. They report a phase shift near 6.7B parameters (from about 65 % to
100 % of layers affected, and zeroing the outliers halves top-1 accuracy), so small models are expected to have none.
""",
    )


# ----------------------------------------------------------------------------- the tabs
def tabs(corpus: Corpus, scan: MassiveScan, max_length: int) -> None:
    """Lazy tabs (ui/frame/tabs.py): arriving on the page draws one section's charts, not all
    six."""
    lazy_tabs(
        ["Massive activations", "One text", "Attention sinks", "int8 outlier features"],
        (
            lambda: layers_tab(scan),
            lambda: text_tab(corpus, max_length),
            lambda: sinks_tab(scan),
            lambda: int8_tab(scan),
        ),
        key="massive_tab",
    )
