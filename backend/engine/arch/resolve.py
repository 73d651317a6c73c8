"""Where everything lives in one loaded model: the family's q/k/v layout resolved per block,
together with the discovered facts (norms, positions, heads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from isoscope.engine.arch.families import Family, family_of, supported_families
from isoscope.engine.arch.lookup import base_of, describe, get_path, module_of, path_in
from isoscope.engine.arch.positions import position_kind, position_offset, position_table_of
from isoscope.engine.arch.tracing import wiring
from isoscope.engine.errors import UnsupportedModelError


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
    """Where everything lives in one loaded model (see :class:`Family` and :func:`wiring`).

    ``position_table`` is the learned table module when the model has one (also for NoPE, whose
    table is zeroed); use :attr:`absolute_position_table` for "the table the model really adds".
    ``head_norms`` are (path, module) of the head norms that are present.
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
    position_offset: int
    gamma_offset: float
    pre_ln: bool
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def absolute_position_table(self) -> torch.nn.Embedding | None:
        """The learned position table the model adds to its word embeddings; None for rotary,
        ALiBi, relative and NoPE models."""
        return self.position_table if self.position_kind == "learned absolute" else None

    def path(self, module: torch.nn.Module) -> str:
        """Dotted path of ``module`` inside the full model (``""`` for the model itself)."""
        return path_in(self.model, module)

    def scaling(self, layer: Layer) -> float:
        """The logit scale of a layer's attention (the module's own ``scaling``, else 1/sqrt(d_h))."""
        return float(getattr(layer.attention, "scaling", self.head_dim**-0.5))


def architecture(model_or_loaded: Any) -> Architecture:
    """Resolve the q/k/v layout (:class:`Family`) and the discovered facts of a model (a
    ``torch.nn.Module`` or a ``LoadedModel``).

    Raises :class:`UnsupportedModelError` when no :class:`Family` entry matches its layout (the
    views that take queries and keys apart need one) or the norms cannot be traced.
    """
    model = module_of(model_or_loaded)
    config = getattr(model, "config", None)
    family = family_of(model)
    if family is None:
        raise UnsupportedModelError(
            f"{describe(model)} has no entry in isoscope's family table, which says where the "
            f"query/key/value projections live (known layouts: {supported_families()}); the "
            "hidden-state, norm and decoder views work without one"
        )
    base = base_of(model)
    blocks = get_path(base, family.layers)
    wired = wiring(model_or_loaded)
    named = dict(model.named_modules())
    by_layer: dict[int, list[tuple[str, torch.nn.Module]]] = {}
    for norm in wired.norms:
        if norm.layer is not None:
            by_layer.setdefault(norm.layer, []).append((norm.role, named[norm.path]))
    layers = []
    for i, block in enumerate(blocks):
        parts = {
            name: get_path(block, getattr(family, name))
            for name in ("query", "key", "value", "fused_qkv", "attention", "attention_output")
        }
        missing = [getattr(family, n) for n, m in parts.items() if m is None and getattr(family, n)]
        if missing:
            raise UnsupportedModelError(
                f"{describe(model)}: layer {i + 1} has no {', '.join(missing)}; this "
                f"{family.name} variant is laid out differently from the one isoscope knows"
            )
        layers.append(Layer(index=i, module=block, norms=tuple(by_layer.get(i, ())), **parts))
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    head_dim = int(getattr(config, "head_dim", 0) or (hidden // heads if heads else 0))
    kv_heads = int(getattr(config, "num_key_value_heads", 0) or heads)
    role_modules = [(n.role, n.path, named[n.path]) for n in wired.norms]
    first = lambda role: next((m for r, _, m in role_modules if r == role), None)  # noqa: E731
    offsets = {n.gamma_offset for n in wired.norms}
    return Architecture(
        family=family,
        model=model,
        base=base,
        layers=tuple(layers),
        word_embeddings=get_path(base, family.word_embeddings),
        position_table=position_table_of(model),
        token_type_table=get_path(base, family.token_type_table),
        embedding_norm=first("emb"),
        final_norm=first("final"),
        head_norms=tuple((p, m) for r, p, m in role_modules if r == "head"),
        position_kind=position_kind(model),
        position_offset=position_offset(model),
        gamma_offset=max(offsets) if offsets else 0.0,
        pre_ln=not wired.post_ln,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
    )
