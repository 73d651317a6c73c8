"""A feature's card: the dimension card (:mod:`isoscope.analysis.dimension`) of one SAE feature's
pre-activation, h . u + offset with (u, offset) from :func:`~isoscope.analysis.sae.encode.feature_direction`,
in place of h[:, d]. The pre-activation is linear in the state, so the card's parts (each
component's direct contribution, plus the offset as a row of its own) sum to it on every token;
the activation function (ReLU, TopK, JumpReLU) comes after, and the card says so."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from isoscope.analysis.dimension import DimensionCard, DimensionSettings, dimension_card
from isoscope.analysis.sae.encode import feature_direction
from isoscope.analysis.sae.formats import SparseAutoencoder
from isoscope.engine.errors import InputError


def activation_note(sae: SparseAutoencoder) -> str:
    """What the card decomposes, and what the SAE does with it afterwards."""
    after = {
        "relu": "the feature's activation is its ReLU",
        "topk": f"the feature's activation is its ReLU where it is among the token's {sae.k} "
        "largest pre-activations (TopK), 0 elsewhere",
        "jumprelu": "the feature's activation is the pre-activation where it exceeds the "
        "feature's threshold (JumpReLU), 0 elsewhere",
    }.get(sae.activation, f"the SAE's {sae.activation} activation follows")
    return (
        "This card decomposes the feature's pre-activation u . h + offset, which is linear in h "
        f"and sums exactly; {after}, which is not decomposed."
    )


def normalisation_note(sae: SparseAutoencoder) -> str | None:
    """How the card differs from the pre-activation for an SAE that rescales each token."""
    if sae.normalise == "constant_norm_rescale":
        return (
            "This SAE rescales each token to norm sqrt(d) before encoding: its pre-activation "
            "is the card's u . h times that per-token factor, plus the offset."
        )
    if sae.normalise == "layer_norm":
        return (
            "This SAE layer-normalises each token before encoding: the card reads u centred "
            "(u . (h - mean(h))), and the pre-activation divides that by the token's standard "
            "deviation before the offset is added."
        )
    return None


def feature_settings(
    sae: SparseAutoencoder, state: int, feature: int, **card: Any
) -> DimensionSettings:
    """The :class:`DimensionSettings` of feature ``feature`` of ``sae`` read at ``state``
    (``card``: the card's other settings, e.g. ``max_length``, ``ablation_texts``)."""
    if isinstance(feature, bool) or not 0 <= int(feature) < sae.width:
        raise InputError(
            f"feature {feature} does not exist: the SAE has features 0 to {sae.width - 1}"
        )
    u, offset = feature_direction(sae, int(feature))
    if sae.normalise == "layer_norm":
        u = u - u.mean()  # u . (h - mean(h)) = (u - mean(u)) . h
    if not np.abs(u).max(initial=0.0) > 0:
        raise InputError(
            f"feature {feature}'s encoder column is zero: its pre-activation is the constant "
            f"{offset:.4g} and has no card; pick another feature"
        )
    return DimensionSettings(
        state=state, direction=u, offset=offset, label=f"SAE feature {feature}", **card
    )


def feature_card(
    loaded, texts, sae: SparseAutoencoder, state: int, feature: int, progress=None, **card: Any
) -> DimensionCard:
    """The dimension card of feature ``feature``'s pre-activation at ``state`` on ``texts``,
    with :func:`activation_note` (and :func:`normalisation_note`) among its notes."""
    settings = feature_settings(sae, state, feature, **card)
    result = dimension_card(loaded, texts, settings, progress=progress)
    notes = [activation_note(sae), normalisation_note(sae)]
    return replace(result, notes=(*[n for n in notes if n], *result.notes))
