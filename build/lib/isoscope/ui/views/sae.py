"""The "SAE features" page (pages/sae.py): a released sparse autoencoder against the geometry of
the selected model and corpus (docs/methods.md section 16): fidelity by token kind, the features
of each outlier and massive dimension, dense and dead features, and one feature's card."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from isoscope.analysis.dimension import DimensionCard
from isoscope.analysis.dimension.params import ABLATION_TEXTS
from isoscope.analysis.sae.card import feature_card
from isoscope.analysis.sae.encode import decoder_norms, feature_direction
from isoscope.analysis.sae.formats import SparseAutoencoder
from isoscope.analysis.sae.load import (
    SAE_SOURCES,
    SaeSource,
    load_sae,
    on_model,
    parse_sae_source,
)
from isoscope.analysis.sae.neuronpedia import feature_url
from isoscope.analysis.sae.params import (
    DENSE_PAPER,
    DENSE_SHARE,
    SAE_MAX_LENGTH,
    TOKEN_KINDS,
    SaeSettings,
)
from isoscope.analysis.sae.scan import SaeReading, run_sae
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, IsoscopeError
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names
from isoscope.plots.sae import (
    KIND_LABELS,
    dense_figure,
    fidelity_figure,
    frequency_figure,
    loadings_figure,
)
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.server import access
from isoscope.ui.widgets import dimension_card as card_sections
from isoscope.ui.widgets.controls import choice_slider
from isoscope.ui.work.cached import cached, heavy

FROM_FILES = "from the SAE's files"
TABS = ("Fidelity", "Dimensions", "Dense & dead", "Feature card")


@cached
def sae_weights(source: str, quota: int | None = None) -> SparseAutoencoder:
    """The SAE ``source`` names, on the CPU (downloaded once, with the models' rules; ``quota``:
    a shared server's download quota in bytes)."""
    return load_sae(source, quota_bytes=quota)


@cached
def sae_source(text: str) -> SaeSource:
    """The SAE source ``text`` parsed (its canonical text is what the cache keys on)."""
    return parse_sae_source(text)


@cached
def feature_facts(source: str, feature: int, top: int = 8) -> dict:
    """One feature's pre-activation (u, offset), the ``top`` dims its decoder row loads on most
    and its Neuronpedia page (None when the release is not known)."""
    sae = sae_weights(source)
    u, offset = feature_direction(sae, feature)
    row = to_numpy(sae.w_dec[feature] / decoder_norms(sae)[feature])
    order = np.argsort(-np.abs(row), kind="stable")[:top]
    return {
        "u": u,
        "offset": offset,
        "dims": order,
        "loadings": row[order],
        "url": feature_url(source, feature, sae.neuronpedia_id or None),
    }


@heavy(lambda loaded, *_a, **_k: f"Encoding with the SAE on {loaded.info.display_name}:", "texts")
def sae_reading(
    loaded: LoadedModel,
    corpus: Corpus,
    source: str,
    n_texts: int,
    settings: SaeSettings,
    *,
    progress,
) -> SaeReading:
    """The SAE ``source`` over the first ``n_texts`` texts of ``corpus``, in one extraction pass."""
    on = on_model(sae_weights(source), loaded, settings.state)
    texts = Corpus(corpus.texts[:n_texts], corpus.name)
    reading, _ = run_sae(loaded, texts, on, settings, progress)
    return reading


@heavy(lambda loaded, *_a, **_k: f"Reading the feature on {loaded.info.display_name}:", "batches")
def sae_feature_card(
    loaded: LoadedModel,
    corpus: Corpus,
    source: str,
    n_texts: int,
    state: int,
    feature: int,
    max_length: int,
    ablation_texts: int,
    *,
    progress,
) -> DimensionCard:
    """The dimension card of feature ``feature``'s pre-activation at ``state`` (the state the
    SAE reads) over the first ``n_texts`` texts of ``corpus``: one forward pass, plus the
    ablation's passes over ``ablation_texts`` texts."""
    return feature_card(
        loaded,
        corpus.texts[:n_texts],
        sae_weights(source),
        state,
        feature,
        progress=progress,
        max_length=max_length,
        ablation_texts=ablation_texts,
    )


def explain() -> None:
    explainer(
        "What is this / references",
        f"""
A **sparse autoencoder** (SAE) trained on one hidden state of a model rewrites each token's vector x as a
sparse code f = σ(W_enc (x − b_dec) + b_enc) and rebuilds it as x̂ = W_dec f + b_dec: each feature is one
decoder direction. Interpretability work reads models through released SAEs; this page asks what they
make of the geometry the other pages measure:
- **Fidelity by token kind**: the fraction of variance unexplained (FVU) and the features on per token
  (L0), split into the first position, tokens carrying a massive activation, special tokens and ordinary
  tokens. SAEs are trained on ordinary tokens; many pipelines drop the first token, whose norm can be
  hundreds of times larger.
- **Features of a dimension**: for each outlier or massive dimension d, the features whose decoder rows
  load on it most (W_dec[f, d] / ‖W_dec[f]‖), and the share of h[t, d] the reconstruction keeps where
  |h[t, d]| is largest.
- **Dense and dead features**: features firing on more than {DENSE_SHARE.default:.0%} of tokens, with the
  cosine of their decoder row with the mean direction and the top principal components (are they the
  anisotropy itself?); features that never fire on the corpus.
- **A feature's card**: the card of the "What is this dimension?" page with the feature's
  pre-activation u·h + offset (u = W_enc[:, f]) in place of h[:, d]: which tokens drive it, which
  components write it, what reads it and what it does. The pre-activation is linear in h, so the
  parts sum to it; the activation that follows (ReLU, TopK, JumpReLU) is not decomposed.

The SAE is given as a Hub id plus its path in the repo (e.g.
`google/gemma-scope-2-270m-pt/resid_post/layer_12_width_16k_l0_medium` for Gemma 3 270M) or a local folder;
Gemma Scope (`params.safetensors`), SAELens and sparsify files are read, safetensors only. The hidden
state it reads comes from its files: the residual stream after block i is state i + 1.

**Sources**
- Bricken et al. 2023, *Towards Monosemanticity: Decomposing Language Models With Dictionary Learning*,
  [transformer-circuits.pub](https://transformer-circuits.pub/2023/monosemantic-features)
- Gao et al. 2024, *Scaling and evaluating sparse autoencoders* (TopK), [arXiv 2406.04093](https://arxiv.org/abs/2406.04093)
- Rajamanoharan et al. 2024, *Jumping Ahead: Improving Reconstruction Fidelity with JumpReLU Sparse
  Autoencoders*, [arXiv 2407.14435](https://arxiv.org/abs/2407.14435)
- Lieberum et al. 2024, *Gemma Scope: Open Sparse Autoencoders Everywhere All At Once on Gemma 2*,
  [arXiv 2408.05147](https://arxiv.org/abs/2408.05147); Gemma Scope 2 covers every layer of Gemma 3
- {DENSE_PAPER.replace("arXiv 2506.15679", "[arXiv 2506.15679](https://arxiv.org/abs/2506.15679)")}
- Sun, Chen, Kolter & Liu 2024, *Massive Activations in Large Language Models*, [arXiv 2402.17762](https://arxiv.org/abs/2402.17762)
- [Neuronpedia](https://www.neuronpedia.org): a page per feature of many released SAEs
""",
    )


def controls(loaded: LoadedModel, corpus: Corpus) -> tuple[str, int, SaeSettings] | None:
    """The SAE source, the texts, the state and the settings; None until an SAE is given."""
    source = st.text_input(
        "SAE (Hub id/path in repo, or a local folder)",
        key="sae_source",
        placeholder="google/gemma-scope-2-270m-pt/resid_post/layer_12_width_16k_l0_medium",
        help=f"Give {SAE_SOURCES}.",
    ).strip()
    c1, c2, c3, c4 = st.columns(4)
    n_max = len(corpus.texts)
    n_texts = c1.slider("Texts", 1, n_max, min(256, n_max), key="sae_n_texts")
    max_length = choice_slider(c2, "Max tokens per text", SAE_MAX_LENGTH, "sae_max_length")
    names = [FROM_FILES, *hidden_state_names(loaded.info.num_layers)]
    state = c3.selectbox(
        "Hidden state", names, key="sae_state", help="Only when the SAE's files do not say."
    )
    dense_share = c4.slider(
        "Dense above",
        float(DENSE_SHARE.low),
        float(DENSE_SHARE.high),
        float(DENSE_SHARE.default),
        step=DENSE_SHARE.step,
        key="sae_dense_share",
        help=DENSE_SHARE.help,
    )
    if not source:
        st.info("Give an SAE trained on this model's residual stream to start.")
        return None
    try:
        parsed = sae_source(source)
        if parsed.kind == "folder" and access.shared():
            raise InputError("a shared server opens SAEs by Hub id only, not server folders")
        if parsed.kind == "hub":  # a shared server's Hub allow-list holds for SAEs too
            access.policy().check_model_source(parsed.repo.text)
        settings = SaeSettings(
            max_length=int(max_length),
            dense_share=float(dense_share),
            state=None if state == FROM_FILES else names.index(state) - 1,
        )
    except IsoscopeError as exc:
        st.error(f"**Cannot use this SAE.** {message(exc)}")
        return None
    return parsed.text, int(n_texts), settings


def reading_or_stop(
    loaded: LoadedModel, corpus: Corpus, source: str, n_texts: int, settings: SaeSettings
) -> tuple[SaeReading, SparseAutoencoder]:
    try:
        sae = sae_weights(source, access.policy().quota_bytes)  # downloaded here, once
        return sae_reading(loaded, corpus, source, n_texts, settings), sae
    except IsoscopeError as exc:
        st.error(f"**Cannot run this SAE.** {message(exc)}")
        st.stop()
        raise  # st.stop() raises


def headline(reading: SaeReading) -> None:
    sae = reading.sae
    ordinary, first = reading.fidelity["ordinary"], reading.fidelity["first_position"]
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("FVU, ordinary tokens", _num(ordinary["fvu"]))
    m2.metric("FVU, first position", _num(first["fvu"]))
    m3.metric("Dense features", f"{len(reading.dense):,}")
    m4.metric("Dead features", f"{len(reading.dead):,} of {sae['width']:,}")
    k = f" (k = {sae['k']})" if sae["k"] else ""
    st.caption(
        f"{sae['format']} SAE · {sae['activation']}{k} · {sae['width']:,} features · reads state "
        f"**{reading.state_name}** ({sae['hook'] or 'as chosen'}) · {reading.n_tokens:,} tokens, "
        "first position and special tokens included"
    )
    for note in reading.notes:
        st.caption(f"ℹ️ {message(note)}")


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def tabs(
    loaded: LoadedModel,
    corpus: Corpus,
    n_texts: int,
    reading: SaeReading,
    sae: SparseAutoencoder,
    settings: SaeSettings,
) -> None:
    lazy_tabs(
        TABS,
        [
            lambda: fidelity_tab(reading),
            lambda: dimensions_tab(reading),
            lambda: dense_tab(reading, settings.dense_share),
            lambda: feature_tab(reading, sae, loaded, corpus, n_texts, settings),
        ],
        key="sae_tab",
    )


def fidelity_tab(reading: SaeReading) -> None:
    st.plotly_chart(fidelity_figure(reading.fidelity), width="stretch", key="sae_fidelity")
    rows = [{"kind": KIND_LABELS[k], **reading.fidelity[k]} for k in TOKEN_KINDS]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.markdown("**Worst-reconstructed tokens** (relative error ‖x − x̂‖² / ‖x‖²)")
    st.dataframe(pd.DataFrame(reading.worst_tokens), hide_index=True, width="stretch")


def dimensions_tab(reading: SaeReading) -> None:
    if not reading.dimensions:
        st.info("No outlier or massive dimension at this state.")
        return
    labels = {
        f"dim {d['dim']} ({', '.join(d['kinds'])})": i for i, d in enumerate(reading.dimensions)
    }
    chosen = st.selectbox("Dimension", list(labels), key="sae_dim")
    dim = reading.dimensions[labels[chosen]]
    c1, c2 = st.columns([3, 2])
    c1.plotly_chart(loadings_figure(dim), width="stretch", key="sae_loadings")
    c2.metric(
        "Kept where |h[t, d]| is largest",
        _num(dim["kept"]),
        help="Σ x̂[t, d] x[t, d] / Σ x[t, d]² over the dimension's largest |h[t, d]| tokens: 1 when the "
        "SAE rebuilds the dimension there, 0 when it drops it.",
    )
    c2.caption(
        f"mean |h[t, d]| there {dim['mean_abs_large']:.3g}, reconstructed "
        f"{dim['mean_abs_reconstructed']:.3g} ({dim['large_tokens']} tokens)"
    )


def dense_tab(reading: SaeReading, dense_share: float) -> None:
    st.plotly_chart(
        frequency_figure(reading.frequency, dense_share), width="stretch", key="sae_frequency"
    )
    if reading.dense:
        st.plotly_chart(dense_figure(reading.dense), width="stretch", key="sae_dense")
        st.dataframe(pd.DataFrame(reading.dense), hide_index=True, width="stretch")
    else:
        st.info("No dense feature on this corpus.")
    dead = reading.dead
    st.markdown(
        f"**{len(dead):,} dead features** (never fire on these texts)"
        + (
            f": {', '.join(map(str, dead[:50]))}{' …' if len(dead) > 50 else ''}"
            if len(dead)
            else ""
        )
    )


def feature_tab(
    reading: SaeReading,
    sae: SparseAutoencoder,
    loaded: LoadedModel,
    corpus: Corpus,
    n_texts: int,
    settings: SaeSettings,
) -> None:
    """One feature: frequency, top-activating tokens, the dims its decoder row writes, its
    pre-activation as a direction and offset, its Neuronpedia page for a known release, and
    below them its card (:func:`feature_card_section`)."""
    default = _default_feature(reading)
    feature = int(st.number_input("Feature", 0, sae.width - 1, default, step=1, key="sae_feature"))
    facts = feature_facts(reading.sae["source"], feature)
    c1, c2, c3 = st.columns(3)
    c1.metric("Fires on", f"{reading.frequency[feature]:.2%}")
    c2.metric("Mean activation when on", f"{reading.mean_activation[feature]:.3g}")
    c3.metric(
        "Pre-activation offset",
        f"{facts['offset']:.3g}",
        help=f"the pre-activation is u·x + offset, u = W_enc[:, f] (‖u‖ = "
        f"{float(np.linalg.norm(facts['u'])):.3g})",
    )
    if facts["url"]:
        st.markdown(f"[Open feature {feature} on Neuronpedia]({facts['url']})")
    tops = reading.top_tokens(feature)
    if tops:
        st.markdown("**Top-activating tokens**")
        st.dataframe(
            pd.DataFrame(tops)[["activation", "token", "context", "text", "position"]],
            hide_index=True,
            width="stretch",
        )
    else:
        st.info("This feature never fires on these texts.")
    st.markdown("**Dimensions its decoder row writes** (loading, largest |loading| first)")
    st.dataframe(
        pd.DataFrame({"dim": facts["dims"], "loading": facts["loadings"]}),
        hide_index=True,
        width="stretch",
    )
    feature_card_section(loaded, corpus, n_texts, reading, settings, feature)


def feature_card_section(
    loaded: LoadedModel,
    corpus: Corpus,
    n_texts: int,
    reading: SaeReading,
    settings: SaeSettings,
    feature: int,
) -> None:
    """The feature's card: the dimension card with the feature's pre-activation in place of
    h[:, d], computed on demand (one more forward pass over the texts)."""
    st.markdown("---")
    st.markdown(f"#### The card of feature {feature}'s pre-activation")
    c1, c2 = st.columns([2, 1])
    show = c1.toggle(
        "Show the feature's card",
        key="sae_card",
        help="The card of the 'What is this dimension?' page, reading u . h + offset (the "
        "feature's pre-activation) in place of h[:, d]: one more forward pass over the texts.",
    )
    ablation_texts = int(
        c2.number_input(
            "Texts for the ablation",
            int(ABLATION_TEXTS.low),
            n_texts,
            min(int(ABLATION_TEXTS.default), n_texts),
            key="sae_card_ablation_texts",
            help=ABLATION_TEXTS.help,
        )
    )
    st.caption(
        "The card decomposes the feature's pre-activation, which is linear in the state, not its "
        f"{reading.sae['activation']} activation: the parts sum to the pre-activation on every "
        "token, including where the feature is off."
    )
    if not show:
        return
    try:
        card = sae_feature_card(
            loaded, corpus, reading.sae["source"], n_texts, reading.state, feature,
            settings.max_length, ablation_texts,
        )  # fmt: skip
    except IsoscopeError as exc:
        st.error(f"**Cannot read this feature's card.** {message(exc)}")
        return
    card_sections.sections(card, key="sae_card", file_name=f"sae_feature_{feature}_card.json")


def _default_feature(reading: SaeReading) -> int:
    for dim in reading.dimensions:
        return int(dim["features"][0]["feature"])
    fired = reading.fired
    return int(fired[0]) if len(fired) else 0
