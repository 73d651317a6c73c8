"""The one architecture map: where each model family keeps its projections, embeddings and norms.

Every view that reaches inside a model (queries/keys, TUPE, position table, LayerNorm, ablation, the
variance lab) asks :func:`architecture` instead of probing attribute names itself. A family is one
:class:`Family` entry in :data:`FAMILIES` (attribute paths, nothing else); adding a family is one
entry there plus one test in ``tests/unit/engine/test_arch.py``.

Canonical norm roles (the names used in the UI, CLI and JSON; see :mod:`backend.analysis.layernorm.params`):

- post-LN (BERT, RoBERTa, ELECTRA, DistilBERT): ``emb`` (embedding LayerNorm), ``attn`` (after
  self-attention + residual), ``out`` (after the FFN + residual);
- pre-LN (GPT-2, OPT, GPT-NeoX, Llama-style): ``pre_attn`` (input of attention), ``pre_mlp``
  (input of the MLP), ``final`` (after the last layer); ``other`` for any further per-layer norm
  (Gemma-2's post-attention / post-feedforward norms);
- ``head`` for the MLM head's transform LayerNorm.

RMSNorm (Llama family) has a gamma and no beta; Gemma's RMSNorm multiplies by (1 + weight), which
:attr:`Family.gamma_offset` records. Position embeddings are ``"learned absolute"`` (a table added
to the word embeddings), ``"rotary"`` (RoPE, no table), ``"relative"`` (a BERT config asking for
relative keys) or ``"none"`` (NoPE: isoscope's ``-nope`` models, table zeroed and frozen).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from backend.engine.errors import UnsupportedModelError

POSITION_KINDS = ("learned absolute", "rotary", "relative", "none")
NORM_ROLES = ("emb", "attn", "out", "pre_attn", "pre_mlp", "other", "final", "head")


@dataclass(frozen=True)
class Family:
    """Attribute paths of one family. ``layers``, embeddings and ``final_norm`` are relative to the
    base model (``model.base_model``); the per-layer paths to one block; ``head_norms`` to the full
    model (only present when a head is loaded). ``fused_qkv`` is a module whose output is
    ``q | k | v`` along the last axis (GPT-2 ``c_attn``); otherwise ``query``/``key``/``value``."""

    name: str
    model_types: tuple[str, ...]
    layers: str
    word_embeddings: str
    position_kind: str
    layer_norms: tuple[tuple[str, str], ...]  # (role, path in a block), forward order
    attention: str  # the attention module of a block (its first output: attention output)
    attention_output: str  # the module whose output is the attention output before the residual
    query: str | None = None
    key: str | None = None
    value: str | None = None
    fused_qkv: str | None = None
    position_table: str | None = None
    token_type_table: str | None = None
    embedding_norm: str | None = None
    final_norm: str | None = None
    head_norms: tuple[str, ...] = ()
    norm_kind: str = "layernorm"  # "layernorm" (gamma, beta) or "rmsnorm" (gamma only)
    gamma_offset: float = 0.0  # effective gamma = weight + offset (Gemma: 1)
    position_offset: int | str = 0  # first table row used as a position; "padding_idx+1" (RoBERTa)

    @property
    def pre_ln(self) -> bool:
        return self.final_norm is not None


_BERT_LAYER = dict(
    layers="encoder.layer",
    word_embeddings="embeddings.word_embeddings",
    position_table="embeddings.position_embeddings",
    token_type_table="embeddings.token_type_embeddings",
    embedding_norm="embeddings.LayerNorm",
    query="attention.self.query",
    key="attention.self.key",
    value="attention.self.value",
    attention="attention.self",
    attention_output="attention.output.dense",
    layer_norms=(("attn", "attention.output.LayerNorm"), ("out", "output.LayerNorm")),
    position_kind="learned absolute",
)
_LLAMA_LAYER = dict(
    layers="layers",
    word_embeddings="embed_tokens",
    final_norm="norm",
    query="self_attn.q_proj",
    key="self_attn.k_proj",
    value="self_attn.v_proj",
    attention="self_attn",
    attention_output="self_attn",
    layer_norms=(("pre_attn", "input_layernorm"), ("pre_mlp", "post_attention_layernorm")),
    position_kind="rotary",
    norm_kind="rmsnorm",
)
_GEMMA2_NORMS = (
    ("pre_attn", "input_layernorm"),
    ("other", "post_attention_layernorm"),
    ("pre_mlp", "pre_feedforward_layernorm"),
    ("other", "post_feedforward_layernorm"),
)

FAMILIES: tuple[Family, ...] = (
    Family("BERT", ("bert",), head_norms=("cls.predictions.transform.LayerNorm",), **_BERT_LAYER),
    Family(
        "RoBERTa",
        ("roberta", "xlm-roberta", "camembert"),
        head_norms=("lm_head.layer_norm",),
        position_offset="padding_idx+1",
        **_BERT_LAYER,
    ),
    Family(
        "ELECTRA",
        ("electra",),
        head_norms=("generator_predictions.LayerNorm",),
        **_BERT_LAYER,
    ),
    Family(
        "DistilBERT",
        ("distilbert",),
        layers="transformer.layer",
        word_embeddings="embeddings.word_embeddings",
        position_table="embeddings.position_embeddings",
        embedding_norm="embeddings.LayerNorm",
        query="attention.q_lin",
        key="attention.k_lin",
        value="attention.v_lin",
        attention="attention",
        attention_output="attention.out_lin",
        layer_norms=(("attn", "sa_layer_norm"), ("out", "output_layer_norm")),
        head_norms=("vocab_layer_norm",),
        position_kind="learned absolute",
    ),
    Family(
        "GPT-2",
        ("gpt2",),
        layers="h",
        word_embeddings="wte",
        position_table="wpe",
        final_norm="ln_f",
        fused_qkv="attn.c_attn",
        attention="attn",
        attention_output="attn",
        layer_norms=(("pre_attn", "ln_1"), ("pre_mlp", "ln_2")),
        position_kind="learned absolute",
    ),
    Family(
        "OPT",
        ("opt",),
        layers="decoder.layers",
        word_embeddings="decoder.embed_tokens",
        position_table="decoder.embed_positions",
        final_norm="decoder.final_layer_norm",
        query="self_attn.q_proj",
        key="self_attn.k_proj",
        value="self_attn.v_proj",
        attention="self_attn",
        attention_output="self_attn",
        layer_norms=(("pre_attn", "self_attn_layer_norm"), ("pre_mlp", "final_layer_norm")),
        position_kind="learned absolute",
        position_offset=2,
    ),
    Family(
        "GPT-NeoX",
        ("gpt_neox",),
        layers="layers",
        word_embeddings="embed_in",
        final_norm="final_layer_norm",
        attention="attention",
        attention_output="attention",
        layer_norms=(("pre_attn", "input_layernorm"), ("pre_mlp", "post_attention_layernorm")),
        position_kind="rotary",
    ),
    Family(
        "Llama",
        ("llama", "qwen2", "qwen3", "mistral", "smollm3", "olmo", "olmo2"),
        **_LLAMA_LAYER,
    ),
    Family("Gemma", ("gemma",), gamma_offset=1.0, **_LLAMA_LAYER),
    Family(
        "Gemma-2",
        ("gemma2", "gemma3_text"),
        gamma_offset=1.0,
        **(_LLAMA_LAYER | {"layer_norms": _GEMMA2_NORMS}),
    ),
)


def supported_families() -> str:
    """Human list for error messages: ``BERT, RoBERTa, ...``."""
    return ", ".join(f.name for f in FAMILIES)


def family_of(model_type: str | None) -> Family | None:
    """The family of a config ``model_type``, or None when isoscope has no map for it."""
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    return None


# ----------------------------------------------------------------------------- resolved modules


@dataclass(frozen=True)
class Layer:
    """The modules of one Transformer block (``index`` 0-based). ``norms`` are (role, module) in
    forward order; ``fused_qkv`` is set instead of ``query``/``key``/``value`` for GPT-2."""

    index: int
    module: torch.nn.Module
    attention: torch.nn.Module
    attention_output: torch.nn.Module
    norms: tuple[tuple[str, torch.nn.Module], ...]
    query: torch.nn.Module | None = None
    key: torch.nn.Module | None = None
    value: torch.nn.Module | None = None
    fused_qkv: torch.nn.Module | None = None


@dataclass(frozen=True)
class Architecture:
    """Where everything lives in one loaded model (see :class:`Family`).

    ``position_table`` is the learned table module when the family has one (also for NoPE, whose
    table is zeroed); use :attr:`absolute_position_table` for "the table the model really adds".
    ``head_norms`` are (path, module) of the MLM head norms that are present.
    """

    family: Family
    model: torch.nn.Module = field(repr=False)
    base: torch.nn.Module = field(repr=False)
    layers: tuple[Layer, ...] = field(repr=False)
    word_embeddings: torch.nn.Module = field(repr=False)
    position_table: torch.nn.Embedding | None = field(repr=False)
    token_type_table: torch.nn.Embedding | None = field(repr=False)
    embedding_norm: torch.nn.Module | None = field(repr=False)
    final_norm: torch.nn.Module | None = field(repr=False)
    head_norms: tuple[tuple[str, torch.nn.Module], ...] = field(repr=False)
    position_kind: str
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def pre_ln(self) -> bool:
        return self.family.pre_ln

    @property
    def absolute_position_table(self) -> torch.nn.Embedding | None:
        """The learned position table the model adds to its word embeddings; None for rotary,
        relative and NoPE models."""
        return self.position_table if self.position_kind == "learned absolute" else None

    def path(self, module: torch.nn.Module) -> str:
        """Dotted path of ``module`` inside the full model (``""`` for the model itself)."""
        for name, m in self.model.named_modules():
            if m is module:
                return name
        raise KeyError(f"{type(module).__name__} is not part of this model")

    def scaling(self, layer: Layer) -> float:
        """The logit scale of a layer's attention (the module's own ``scaling``, else 1/sqrt(d_h))."""
        return float(getattr(layer.attention, "scaling", self.head_dim**-0.5))


def _get(root: torch.nn.Module, path: str | None) -> Any:
    if path is None:
        return None
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _base(model: torch.nn.Module) -> torch.nn.Module:
    base = getattr(model, "base_model", None)
    return base if isinstance(base, torch.nn.Module) else model


def _position_kind(family: Family, config: Any) -> str:
    if getattr(config, "isoscope_nope", False):
        return "none"
    kind = getattr(config, "position_embedding_type", None)
    if family.position_kind == "learned absolute" and kind not in (None, "absolute"):
        return "relative"
    return family.position_kind


def architecture(model_or_loaded: Any) -> Architecture:
    """Resolve the :class:`Family` of a model (a ``torch.nn.Module`` or a ``LoadedModel``).

    Raises :class:`UnsupportedModelError` when the model type has no entry in :data:`FAMILIES` or
    its modules are not where the entry says.
    """
    model = getattr(model_or_loaded, "model", model_or_loaded)
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    family = family_of(model_type)
    kind = f"{type(model).__name__} ({model_type or 'no model_type'})"
    if family is None:
        raise UnsupportedModelError(
            f"{kind} is not a model family isoscope can look inside; supported: "
            f"{supported_families()} (the hidden-state views work for any model)"
        )
    base = _base(model)
    blocks = _get(base, family.layers)
    if not isinstance(blocks, torch.nn.ModuleList) or len(blocks) == 0:
        raise UnsupportedModelError(
            f"{kind}: no list of Transformer blocks at {family.layers!r}; this {family.name} variant "
            "is laid out differently from the one isoscope knows"
        )
    layers = []
    for i, block in enumerate(blocks):
        norms = tuple((role, _get(block, path)) for role, path in family.layer_norms)
        parts = {
            name: _get(block, getattr(family, name))
            for name in ("query", "key", "value", "fused_qkv", "attention", "attention_output")
        }
        missing = [p for (_, p), (_, m) in zip(family.layer_norms, norms, strict=True) if m is None]
        missing += [
            getattr(family, n) for n, m in parts.items() if m is None and getattr(family, n)
        ]
        if missing:
            raise UnsupportedModelError(
                f"{kind}: layer {i + 1} has no {', '.join(missing)}; this {family.name} variant is "
                "laid out differently from the one isoscope knows"
            )
        layers.append(Layer(index=i, module=block, norms=norms, **parts))
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    head_dim = int(getattr(config, "head_dim", 0) or (hidden // heads if heads else 0))
    kv_heads = int(getattr(config, "num_key_value_heads", 0) or heads)
    return Architecture(
        family=family,
        model=model,
        base=base,
        layers=tuple(layers),
        word_embeddings=_get(base, family.word_embeddings),
        position_table=_get(base, family.position_table),
        token_type_table=_get(base, family.token_type_table),
        embedding_norm=_get(base, family.embedding_norm),
        final_norm=_get(base, family.final_norm),
        head_norms=tuple((p, m) for p in family.head_norms if (m := _get(model, p)) is not None),
        position_kind=_position_kind(family, config),
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
    )


def position_table(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The learned position-table module of a model, or None (rotary, unsupported family, ...).

    Also returns the zeroed table of a NoPE model; :func:`backend.engine.models.position_table` is the
    "what the model really adds" accessor."""
    try:
        return architecture(model_or_loaded).position_table
    except UnsupportedModelError:
        return None


def absolute_position_table(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The position table the model really adds to its word embeddings, or None (rotary, relative,
    NoPE, unsupported family)."""
    try:
        return architecture(model_or_loaded).absolute_position_table
    except UnsupportedModelError:
        return None


def position_embedding_label(model: torch.nn.Module) -> str:
    """The model card's "position embeddings" line, for any model (also families without a map)."""
    config = model.config
    try:
        arch = architecture(model)
    except UnsupportedModelError:
        arch = None
    kind = arch.position_kind if arch is not None else None
    if kind == "none" or getattr(config, "isoscope_nope", False):
        return "none (NoPE: table zeroed and frozen)"
    if kind == "rotary" or (
        kind is None
        and (
            getattr(config, "rope_theta", None) is not None
            or getattr(config, "rope_scaling", None)
            or getattr(config, "rope_parameters", None)
            or getattr(config, "rotary_dim", None)
        )
    ):
        return "rotary (RoPE)"
    if kind == "relative" or (
        kind is None and getattr(config, "position_embedding_type", None) not in (None, "absolute")
    ):
        return f"relative ({getattr(config, 'position_embedding_type', 'relative')})"
    if arch is not None and arch.position_table is not None:
        return f"absolute, learned ({arch.position_table.num_embeddings} positions)"
    return "unknown"
