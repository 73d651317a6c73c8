"""What the tabs of the Positional page share: the sources their explainers cite, the note
for rotary models, the outlier dims by state and the text-only guard."""

from __future__ import annotations

import streamlit as st

from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.ui.frame.literal import literal
from isoscope.ui.frame.page import load_or_stop
from isoscope.ui.work.media import applies_to_text
from isoscope.ui.work.results import outlier_dims_by_state

SOURCES = {
    "luo": "Luo, Kulmizev & Mao 2021, *Positional Artefacts Propagate Through Masked Language "
    "Model Embeddings* (arXiv 2011.04393)",
    "busters": "Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, *BERT Busters: Outlier "
    "Dimensions that Disrupt Transformers* (arXiv 2105.06990)",
    "tupe": "Ke, He & Liu 2021, *Rethinking Positional Encoding in Language Pre-training* (TUPE, arXiv 2006.15595)",
    "chi": "Chi, Fan, Chen, Rudnicky & Ramadge 2023, *Latent Positional Information is in the "
    "Self-Attention Variance of Transformer Language Models Without Positional Embeddings* "
    "(arXiv 2305.13571)",
    "vit": "Dosovitskiy et al. 2020, *An Image is Worth 16x16 Words: Transformers for Image "
    "Recognition at Scale* (ViT, arXiv 2010.11929), Fig. 7",
    "godey": "Godey, de la Clergerie & Sagot 2023, *Is Anisotropy Inherent to Transformers?* (arXiv 2306.07656)",
    "rope": "Su, Lu, Pan, Murtadha, Wen & Liu 2021, *RoFormer: Enhanced Transformer with Rotary "
    "Position Embedding* (arXiv 2104.09864)",
}


_ROTARY_WHY = {
    "table": "there is no position-embedding table to plot: RoPE adds nothing to the token embeddings",
    "tupe": "TUPE's split needs an additive position embedding inside the first layer's input "
    "(LN(w + p)); RoPE instead rotates every layer's queries and keys by a position-dependent angle, "
    "so the logit q_i·k_j has no separate position term to split out",
}


def rotary_note(info, view: str) -> bool:
    """For a rotary (RoPE) model, explain why the position-table or TUPE view does not apply and
    point to the position probe; returns False (and shows nothing) for other models."""
    if "rotary" not in str(info.position_embedding).lower():
        return False
    st.info(
        f"**{literal(info.display_name)}** uses rotary position embeddings (RoPE; Su et al. 2021, "
        f"arXiv 2104.09864), so {_ROTARY_WHY[view]}. Whether the hidden states still carry absolute "
        "position is measurable: open the **Position probe** tab, which trains a linear probe on the "
        "hidden states of every layer.",
        icon=":material/rotate_right:",
    )
    return True


def outliers_by_name(result: ExtractionResult) -> dict[str, list[int]]:
    """Headline outlier dims of every hidden state, by state name."""
    return dict(zip(result.state_names, outlier_dims_by_state(result), strict=True))


def text_extraction(what: str, why: str) -> tuple[LoadedModel, ExtractionResult] | None:
    """The selection's model and extraction when they are of texts; None for images and audio,
    where the view ``what`` (which ``why``) does not apply, as the page then says."""
    loaded, result = load_or_stop()
    return (loaded, result) if applies_to_text(result, what, why) else None
