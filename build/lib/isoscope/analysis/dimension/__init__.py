"""What is this dimension? One card for a basis dimension d or a direction u of a hidden state
(docs/methods.md, "One dimension, explained").

Public API (the SAE helper and every page call this)::

    from isoscope.analysis.dimension import DimensionSettings, dimension_card
    card = dimension_card(loaded, texts, DimensionSettings(state=5, dim=223))
    card = dimension_card(loaded, texts, DimensionSettings(state=12, direction=u, offset=b,
                                                           label="feature 17"))

``dimension_card(loaded, texts, settings) -> DimensionCard``: ``loaded`` a text
:class:`~isoscope.engine.load.models.LoadedModel`, ``texts`` a sequence of strings, ``settings`` a
:class:`DimensionSettings` (the state 0..L; ``dim`` or ``direction``; an optional scalar
``offset`` added to h . u, so an SAE feature's pre-activation ``W_enc[f] . (x - b_dec) + b_enc``
is ``direction=W_enc[f], offset=b_enc - W_enc[f] . b_dec``). The card holds

- where it shows: the top tokens at both ends with context, the histogram, the split by token
  kind and by position at the chosen state, and the value on every state (``by_state``);
- what writes it: the direct contribution of each component (:mod:`.chain`: embeddings; per
  layer the token mixer, split by head for attention, and the MLP, split by expert for a routed
  MoE; a post-norm stack's norm biases, Kobayashi et al. 2021) as a mean over tokens, at the first
  position, at the other positions and at the top tokens; they sum to the value on every token,
  ``sum_check`` the largest difference;
- what reads it: each norm's gamma and beta at d, and each projection it feeds: the weight
  column's norm times |gamma_d| against the median column (:func:`.card.readers`), and per
  attention head the share of its query-key logit the value carries (:mod:`.qk`);
- what it does: for decoders the tokens it promotes and suppresses through the final norm and
  the unembedding; the total effect of zeroing or mean-replacing it at the chosen state on a
  capped part of the corpus, beside random dimensions (:mod:`.ablation`);
- its share of the geometry: cosine share, variance share, the massive and int8 rules.

Everything but the ablation comes from one forward pass over the corpus with hooks; the ablation
runs ``2 * (1 + controls) + 1`` passes over at most ``ablation_texts`` texts.
"""

from __future__ import annotations

from isoscope.analysis.dimension.card import DimensionCard, build_card
from isoscope.analysis.dimension.settings import DimensionSettings, read_direction


def dimension_card(loaded, texts, settings: DimensionSettings, progress=None) -> DimensionCard:
    """The :class:`DimensionCard` of ``settings`` on ``texts`` (module doc)."""
    return build_card(loaded, texts, settings, progress=progress)


__all__ = ["DimensionCard", "DimensionSettings", "dimension_card", "read_direction"]
