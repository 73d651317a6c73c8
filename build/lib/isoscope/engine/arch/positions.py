"""Position information, from the modules and the config: the kind (:data:`POSITION_KINDS`), the
absolute table and its first row, and the model card's label."""

from __future__ import annotations

from typing import Any, cast

import torch

from isoscope.engine.arch.lookup import base_of, module_of

POSITION_KINDS = ("learned absolute", "rotary", "alibi", "relative", "none")
_ROPE_CONFIG_KEYS = (
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "rotary_dim",
    "rotary_pct",
    "rotary_emb_base",
    "partial_rotary_factor",
)


def position_table_of(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The absolute position table: an ``nn.Embedding`` of the base model other than the word
    embeddings with ``max_position_embeddings`` (Whisper: ``max_source_positions``) rows (OPT
    keeps 2 more). Also the zeroed table of a NoPE model, and Whisper's fixed sinusoidal one
    (:func:`is_sinusoidal_table`)."""
    model = module_of(model_or_loaded)
    config = model.config
    # Whisper's encoder names its table's size max_source_positions (frames)
    n = int(
        getattr(config, "max_position_embeddings", 0)
        or getattr(config, "max_source_positions", 0)
        or 0
    )
    if n <= 0:
        return None
    try:
        words = (
            cast(Any, model).get_input_embeddings()
            if hasattr(model, "get_input_embeddings")
            else None
        )
    except NotImplementedError:  # CANINE: hashed character embeddings, no single table
        words = None
    for module in base_of(model).modules():
        if (
            type(module) is not torch.nn.Embedding
            and not isinstance(module, torch.nn.Embedding)
            or module is words
        ):
            continue
        if not n <= module.num_embeddings <= n + 2:
            continue
        # a sinusoidal module is a table added to the input (Marian, Pegasus) unless it feeds
        # rotary attention (RoFormer); its values must be the sinusoids
        if "sinusoidal" not in type(module).__name__.lower() or (
            not _uses_rotary(model) and is_sinusoidal_table(module.weight)
        ):
            return module
    return None


def position_offset(model_or_loaded: Any) -> int:
    """First table row used as a position: the table's own ``offset`` (OPT: 2), else
    ``padding_idx + 1`` for tables that reserve the padding row (RoBERTa), else 0."""
    table = position_table_of(model_or_loaded)
    if table is None:
        return 0
    offset = getattr(table, "offset", None)
    if isinstance(offset, int):
        return offset
    return int(table.padding_idx) + 1 if table.padding_idx is not None else 0


def _uses_rotary(model: torch.nn.Module) -> bool:
    config = model.config
    rotary_module = any(
        "rotary" in type(m).__name__.lower() or "inv_freq" in dict(m.named_buffers(recurse=False))
        for m in model.modules()
    )
    return bool(
        rotary_module
        or hasattr(config, "rotary_value")
        or any(getattr(config, k, None) is not None for k in _ROPE_CONFIG_KEYS)
    )


def position_kind(model_or_loaded: Any) -> str:
    """One of :data:`POSITION_KINDS`, from the model's modules and its config."""
    model = module_of(model_or_loaded)
    config = model.config
    if getattr(config, "isoscope_nope", False):
        return "none"
    attn_config = getattr(config, "attn_config", None)
    if getattr(config, "alibi", False) is True or getattr(attn_config, "alibi", False) is True:
        return "alibi"
    if any(
        "alibi" in name.lower() for name in dir(type(base_of(model))) if not name.startswith("__")
    ):
        return "alibi"
    if _uses_rotary(model):
        return "rotary"
    if getattr(config, "position_embedding_type", None) not in (None, "absolute") or any(
        getattr(config, k, None) for k in ("relative_attention", "relative_attention_num_buckets")
    ):
        return "relative"
    if position_table_of(model) is not None:
        return "learned absolute"
    return "none"


# ----------------------------------------------------------------------------- resolved modules
def position_table(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The learned position-table module of a model, or None (rotary, ALiBi, relative, none).

    Also returns the zeroed table of a NoPE model; :func:`isoscope.engine.load.models.position_table` is the
    "what the model really adds" accessor."""
    return position_table_of(model_or_loaded)


def absolute_position_table(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The position table the model really adds to its word embeddings, or None (rotary, ALiBi,
    relative, NoPE)."""
    return (
        position_table_of(model_or_loaded)
        if position_kind(model_or_loaded) == ("learned absolute")
        else None
    )


def position_embedding_label(model: torch.nn.Module) -> str:
    """The model card's "position embeddings" line, for any model."""
    kind = position_kind(model)
    config = model.config
    if kind == "none":
        if getattr(config, "isoscope_nope", False):
            return "none (NoPE: table zeroed and frozen)"
        return "none"
    if kind == "rotary":
        return "rotary (RoPE)"
    if kind == "alibi":
        return "ALiBi (linear attention biases)"
    if kind == "relative":
        return (
            f"relative ({getattr(config, 'position_embedding_type', None) or 'relative attention'})"
        )
    table = position_table_of(model)
    assert table is not None  # position_kind said "learned absolute": the table exists
    if is_sinusoidal_table(table.weight):
        return f"absolute, fixed sinusoidal table ({table.num_embeddings} positions)"
    return f"absolute, learned ({table.num_embeddings} positions)"


def is_sinusoidal_table(weight: torch.Tensor) -> bool:
    """Whether a (P, d) table holds Vaswani et al.'s sinusoids as [sin | cos] halves (Whisper's
    encoder): read from the values, since a fixed table is a parameter like a learned one. Row 0
    is sin(0) = 0 then cos(0) = 1, and every row has sin^2 + cos^2 = 1 per frequency, so the norm
    sqrt(d / 2)."""
    rows = weight.detach().float().cpu()
    if rows.dim() != 2 or rows.shape[1] % 2 or rows.shape[0] < 2:
        return False
    half = rows.shape[1] // 2
    first = rows[0]
    norms = rows.norm(dim=1) / half**0.5
    return bool(
        first[:half].abs().max() < 1e-3
        and (first[half:] - 1).abs().max() < 1e-3
        and (norms - 1).abs().max() < 1e-2
    )
