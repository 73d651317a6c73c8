"""Architecture facts of a loaded model, decided in one place and read from the model itself.

Every view that reaches inside a model (queries/keys, TUPE, position table, LayerNorm, ablation,
int8 sites, the variance lab) asks this module instead of probing attribute names itself. What can
be discovered is discovered, with no list of model-type names:

- :func:`is_causal`: the definition, measured (changing the last token leaves every earlier
  position's hidden states as they were, :func:`behaviour`); the attention modules' own
  ``is_causal`` flags only where that probe cannot tell.
- :func:`behaviour`: the same probe says whether right-padding with a mask moves a real token's
  state (FNet's Fourier mixing, ConvBERT's convolutions do); such a model runs unpadded.
- :func:`wiring`: every norm of the model, found by tracing one forward pass with hooks: which
  norm's output is the input of which projection (``nn.Linear``, GPT-2's ``Conv1D``, routers and
  fused MoE experts: any module owning a >= 2-D weight; routed experts get a subset of its rows).
  The roles follow from that wiring and the order of the calls inside each Transformer block
  (the ``nn.ModuleList`` of ``num_hidden_layers`` blocks); cached per model fingerprint.
  LayerNorm vs RMSNorm (does a constant shift of the input change the output?) and Gemma's
  (1 + weight) (does the norm still output something with its weight zeroed?) come from the module.
- :func:`layer_pattern`: the token mixers of every layer (softmax attention full / sliding /
  latent, Mamba, Mamba-2, Gated DeltaNet, linear attention, short convolution, RG-LRU, RWKV;
  parallel and shared blocks) and the AltUp stream count, from parameters and one traced pass;
  :func:`pattern_sentence` renders it (:mod:`~isoscope.engine.arch.mixers`).
- :func:`position_kind`: ``"learned absolute"`` (a table added to the word embeddings),
  ``"rotary"``, ``"alibi"``, ``"relative"`` or ``"none"`` (NoPE: isoscope's ``-nope`` models,
  table zeroed and frozen), from the modules and the config.

Canonical norm roles (the names used in the UI, CLI and JSON; see
:mod:`isoscope.analysis.layernorm.params`):

- ``emb``: a norm before the first block (BERT's embedding LayerNorm);
- ``pre_attn`` / ``pre_mlp``: a per-layer norm whose output is the input of the attention / MLP
  projections (pre-LN: GPT-2 ``ln_1`` / ``ln_2``, Llama, Gemma's ``pre_feedforward_layernorm``);
- ``attn`` (post-attention) / ``out`` (post-MLP): a per-layer norm that runs after the attention
  / MLP and feeds neither's projections of its own block (post-LN BERT's two norms, whose output
  is the residual stream; Gemma-2/3's and OLMo-2's post-attention / post-feedforward norms);
- ``other``: a further per-layer norm (OLMo-2's q/k norms inside attention);
- ``final``: a norm after the last block; ``head`` for one in a head (the MLM transform LayerNorm).

What cannot be discovered is one :class:`Family` entry in :data:`FAMILIES`: where the query, key
and value projections (or GPT-2's fused one) live, for the views that take them apart (TUPE). The
queries/keys view needs no entry: it reads q and k at the attention call
(:mod:`isoscope.engine.arch.qk_capture`) or, for attention in a modeling file's own code, as the
operands of the product whose softmax is the attention (:mod:`isoscope.engine.arch.scores`).
A family matches by layout (its paths resolve on the model), not by name. A model no
entry matches still gets every view that needs none (hidden states, norms, int8, massive
activations); :func:`architecture` refuses the rest in one line naming the model and what is missing.

The package, one module per seam: :mod:`~isoscope.engine.arch.families` (the table),
:mod:`~isoscope.engine.arch.lookup` (paths, blocks), :mod:`~isoscope.engine.arch.probe` (a random
input and one forward pass), :mod:`~isoscope.engine.arch.causality`,
:mod:`~isoscope.engine.arch.norms` (the records and the per-module tests),
:mod:`~isoscope.engine.arch.tracing` (the traced pass), :mod:`~isoscope.engine.arch.scores`
(softmax attention read from the computation), :mod:`~isoscope.engine.arch.positions`,
:mod:`~isoscope.engine.arch.resolve` (:func:`architecture`) and
:mod:`~isoscope.engine.arch.memo`, the one memo of these facts and its lifetime.
"""

from __future__ import annotations

from isoscope.engine.arch.behaviour import PROBE_TOKENS, Behaviour, behaviour
from isoscope.engine.arch.causality import causal_by_definition, config_is_causal, is_causal
from isoscope.engine.arch.families import FAMILIES, Family, family_of, supported_families
from isoscope.engine.arch.lookup import blocks_of
from isoscope.engine.arch.memo import forget_all
from isoscope.engine.arch.mixers import (
    MIXER_KINDS,
    SOFTMAX_KINDS,
    LayerKinds,
    LayerPattern,
    Mixer,
    layer_pattern,
    pattern_sentence,
)
from isoscope.engine.arch.norms import NORM_ROLES, Norm, ProjectionInput, Wiring, is_norm, norm_kind
from isoscope.engine.arch.positions import (
    POSITION_KINDS,
    absolute_position_table,
    is_sinusoidal_table,
    position_embedding_label,
    position_kind,
    position_offset,
    position_table,
    position_table_of,
)
from isoscope.engine.arch.probe import TRACE_SAMPLES, TRACE_TOKENS
from isoscope.engine.arch.resolve import Architecture, Layer, architecture
from isoscope.engine.arch.tracing import projection_inputs, wiring

__all__ = [
    "FAMILIES",
    "MIXER_KINDS",
    "SOFTMAX_KINDS",
    "LayerKinds",
    "LayerPattern",
    "Mixer",
    "layer_pattern",
    "pattern_sentence",
    "NORM_ROLES",
    "POSITION_KINDS",
    "PROBE_TOKENS",
    "TRACE_SAMPLES",
    "TRACE_TOKENS",
    "Architecture",
    "Behaviour",
    "Family",
    "Layer",
    "Norm",
    "ProjectionInput",
    "Wiring",
    "absolute_position_table",
    "architecture",
    "behaviour",
    "blocks_of",
    "causal_by_definition",
    "config_is_causal",
    "family_of",
    "forget_all",
    "is_causal",
    "is_norm",
    "is_sinusoidal_table",
    "norm_kind",
    "position_embedding_label",
    "position_kind",
    "position_offset",
    "position_table",
    "position_table_of",
    "projection_inputs",
    "supported_families",
    "wiring",
]
