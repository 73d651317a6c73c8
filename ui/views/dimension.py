"""The "What is this dimension?" page's body (pages/dimension.py): the card of one dimension or
direction at one hidden state (docs/methods.md, "One dimension, explained"). The arithmetic lives
in isoscope.analysis.dimension, the figures in isoscope.plots.dimension."""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st

from isoscope.analysis.dimension import DimensionCard, DimensionSettings, dimension_card
from isoscope.analysis.dimension.directions import mean_direction, principal_direction
from isoscope.analysis.dimension.params import ABLATION_TEXTS, CONTROLS, TOP_K
from isoscope.analysis.outliers import strongest_dims
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.sharing.links import state_index
from isoscope.ui.widgets import dimension_card as card_sections
from isoscope.ui.widgets.upload import file_upload
from isoscope.ui.work.cached import heavy

KINDS = ("dimension", "mean direction", "principal component", "a vector (.npy)")


@heavy(lambda loaded, *_, **__: f"Reading {loaded.info.display_name}:", "batches")
def card_of(
    loaded: LoadedModel,
    result: ExtractionResult,
    state: int,
    dim: int | None,
    kind: str,
    component: int,
    upload_sha: str,
    top_k: int,
    ablation_texts: int,
    controls: int,
    _direction: np.ndarray | None = None,
    *,
    progress,
) -> DimensionCard:
    """The card of ``dim`` (or of the direction ``kind`` names: the state's mean direction, its
    ``component``-th principal component of the token sample, or the uploaded ``_direction``,
    keyed by its sha) at ``state`` on the extraction's texts."""
    label = (
        "" if kind == "dimension" else kind if kind != "principal component" else f"PC {component}"
    )
    direction = _direction
    if kind == "mean direction":
        direction = mean_direction(result.mean[state])
    elif kind == "principal component":
        direction = principal_direction(result.sample_vectors[state], component)
    settings = DimensionSettings(
        state=state,
        dim=dim if kind == "dimension" else None,
        direction=None if kind == "dimension" else direction,
        label=label,
        top_k=top_k,
        ablation_texts=ablation_texts,
        controls=controls,
        max_length=result.settings.max_length,
    )
    return dimension_card(loaded, result.texts, settings, progress=progress)


def explain() -> None:
    explainer(
        "What is this / references",
        """
After "dimension d is an outlier at state l" comes "what is d?". This card reads one dimension
(or a direction u, with h . u in place of h[:, d]) of one hidden state and answers four questions,
all from one extra forward pass over the corpus:

- **Where it shows**: the tokens with the largest and smallest values, its histogram, its mean by
  token kind and position, and its value on every state (outlier dims follow token frequency,
  Puccetti et al.).
- **What writes it**: the direct contribution of every component. In a pre-norm stack the residual
  stream is a sum, h_l = h_0 + sum (a_i + m_i), so each token mixer (split by attention head) and
  each MLP (split by expert) adds its own part (Elhage et al.). In a post-norm stack (BERT, MiniLM)
  each norm's mean and scale are frozen at their values for the token, which makes the norm linear:
  a component c adds gamma_d (c_d - mean(c)) / s, and each norm's beta is a part of its own
  (Kobayashi et al.). The parts sum to the value on every token; the card shows the largest
  difference. Massive activations are written at once by one early MLP (Sun et al.).
- **What reads it**: each norm's gamma and beta at d, and for each projection fed by that norm the
  weight column's norm times |gamma_d| against the median column (BERT Busters read the norms).
  For attention, the share of each head's query-key logit that it carries (Bondarenko et al.).
- **What it does**: for decoders, the tokens it promotes and suppresses through the final norm
  and the unembedding (the logit lens); for every model, the change in next-token loss (or the
  final state) when it is zeroed or replaced by its mean, beside random dimensions.

**Sources**
- Elhage et al. 2021, *A Mathematical Framework for Transformer Circuits*, [transformer-circuits.pub](https://transformer-circuits.pub/2021/framework/index.html)
- Kobayashi, Kuribayashi, Yokoi & Inui 2021, *Incorporating Residual and Normalization Layers into
  Analysis of Masked Language Models*, [arXiv 2109.07152](https://arxiv.org/abs/2109.07152)
- Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, *BERT Busters: Outlier Dimensions that Disrupt Transformers*, [arXiv 2105.06990](https://arxiv.org/abs/2105.06990)
- Sun, Chen, Kolter & Liu 2024, *Massive Activations in Large Language Models*, [arXiv 2402.17762](https://arxiv.org/abs/2402.17762)
- Bondarenko, Nagel & Blankevoort 2023, *Quantizable Transformers*, [arXiv 2306.12929](https://arxiv.org/abs/2306.12929)
- Puccetti, Rogers, Drozd & Dell'Orletta 2022, *Outlier Dimensions that Disrupt Transformers are
  Driven by Frequency*, [arXiv 2205.11380](https://arxiv.org/abs/2205.11380)
- Timkey & van Schijndel 2021, *All Bark and No Bite*, [arXiv 2109.04404](https://arxiv.org/abs/2109.04404)
- nostalgebraist 2020, *interpreting GPT: the logit lens*, [LessWrong](https://www.lesswrong.com/posts/AcKRB8wDpdaN6v6ru/interpreting-gpt-the-logit-lens)
""",
    )


def controls(result: ExtractionResult):
    """(state, dim, kind, component, upload sha, direction, top_k, ablation texts, controls)."""
    names = list(result.state_names)
    default_state = max(1, result.num_layers // 2) if result.num_layers >= 1 else 0
    c1, c2, c3 = st.columns([2, 1, 1])
    state_name = c1.select_slider(
        "Hidden state",
        names,
        value=names[state_index(names, default_state, "dim_state", by_name=True)],
        key="dim_state",
    )
    state = names.index(state_name)
    kind = c2.selectbox("Read", KINDS, key="dim_kind")
    width = int(result.mean.shape[-1])
    dim, component, sha, direction = None, 1, "", None
    if kind == "dimension":
        if "dim_dim" not in st.session_state:
            st.session_state["dim_dim"] = strongest_dims(result.mean[state], 1)[0]
        dim = int(c3.number_input("Dimension", 0, width - 1, None, step=1, key="dim_dim"))
    elif kind == "principal component":
        component = int(c3.number_input("Component", 1, 20, 1, key="dim_pc"))
    else:
        upload = file_upload("u (.npy)", type=["npy"], key="dim_upload", where=c3)
        if upload is None:
            st.info(f"Upload a .npy file holding one vector of {width} values.")
            st.stop()
        data = upload.data
        sha = hashlib.sha256(data).hexdigest()
        direction = _read_upload(data)
    d1, d2, d3 = st.columns(3)
    top_k = int(d1.number_input("Top tokens per end", int(TOP_K.low), int(TOP_K.high),
                                int(TOP_K.default), key="dim_top_k"))  # fmt: skip
    ablation_texts = int(
        d2.number_input(
            "Texts for the ablation", int(ABLATION_TEXTS.low), len(result.texts),
            min(int(ABLATION_TEXTS.default), len(result.texts)), key="dim_ablation_texts",
            help="Each ablation is a forward pass over this many texts (0: no ablation).",
        )
    )  # fmt: skip
    n_controls = int(d3.number_input("Random control dims", int(CONTROLS.low), int(CONTROLS.high),
                                     int(CONTROLS.default), key="dim_controls"))  # fmt: skip
    return state, dim, kind, component, sha, direction, top_k, ablation_texts, n_controls


def _read_upload(data: bytes) -> np.ndarray:
    import io

    try:
        u = np.squeeze(np.load(io.BytesIO(data), allow_pickle=False))
    except (ValueError, OSError) as exc:
        st.error(f"**Not a readable .npy array.** {message(exc)}")
        st.stop()
        raise
    return np.asarray(u, dtype=np.float64)


def card_or_stop(loaded, result, choice) -> DimensionCard:
    state, dim, kind, component, sha, direction, top_k, ablation_texts, n_controls = choice
    try:
        return card_of(loaded, result, state, dim, kind, component, sha, top_k, ablation_texts,
                       n_controls, _direction=direction)  # fmt: skip
    except IsoscopeError as exc:
        st.error(f"**Cannot read this dimension.** {message(exc)}")
        st.stop()
        raise


# The card's sections are drawn by isoscope.ui.widgets.dimension_card, which the SAE page's
# feature card shares; the page lists them in its order through these.
def headline(card: DimensionCard) -> None:
    card_sections.headline(card)


def where_it_shows(card: DimensionCard) -> None:
    card_sections.where_it_shows(card)


def what_writes_it(card: DimensionCard) -> None:
    card_sections.what_writes_it(card)


def what_reads_it(card: DimensionCard) -> None:
    card_sections.what_reads_it(card)


def what_it_does(card: DimensionCard) -> None:
    card_sections.what_it_does(card)


def geometry(card: DimensionCard) -> None:
    card_sections.geometry(card)
