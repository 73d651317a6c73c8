"""The family table: what cannot be discovered about a model, where the query, key and value
projections (or GPT-2's fused one) live. A family matches by layout (its paths resolve on the
model), not by name."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from isoscope.engine.arch.lookup import base_of, get_path


@dataclass(frozen=True)
class Family:
    """What cannot be discovered: attribute paths of one layout. ``layers`` and ``word_embeddings``
    are relative to the base model (``model.base_model``); the other paths to one block.
    ``fused_qkv`` is a module whose output is ``q | k | v`` along the last axis (GPT-2 ``c_attn``);
    otherwise ``query``/``key``/``value``."""

    name: str
    layers: str
    word_embeddings: str
    attention: str  # the attention module of a block (its first output: attention output)
    attention_output: str  # the module whose output is the attention output before the residual
    query: str | None = None
    key: str | None = None
    value: str | None = None
    fused_qkv: str | None = None
    token_type_table: str | None = None


_BERT = dict(
    layers="encoder.layer",
    word_embeddings="embeddings.word_embeddings",
    token_type_table="embeddings.token_type_embeddings",
    query="attention.self.query",
    key="attention.self.key",
    value="attention.self.value",
    attention="attention.self",
    attention_output="attention.output.dense",
)
_QKV_PROJ = dict(
    query="self_attn.q_proj",
    key="self_attn.k_proj",
    value="self_attn.v_proj",
    attention="self_attn",
    attention_output="self_attn",
)

FAMILIES: tuple[Family, ...] = (
    Family("BERT-style encoder", **_BERT),
    Family(
        "DistilBERT",
        layers="transformer.layer",
        word_embeddings="embeddings.word_embeddings",
        query="attention.q_lin",
        key="attention.k_lin",
        value="attention.v_lin",
        attention="attention",
        attention_output="attention.out_lin",
    ),
    Family(
        "GPT-2",
        layers="h",
        word_embeddings="wte",
        fused_qkv="attn.c_attn",
        attention="attn",
        attention_output="attn",
    ),
    Family("OPT", layers="decoder.layers", word_embeddings="decoder.embed_tokens", **_QKV_PROJ),
    Family("Llama-style decoder", layers="layers", word_embeddings="embed_tokens", **_QKV_PROJ),
    Family(
        "GPT-NeoX",
        layers="layers",
        word_embeddings="embed_in",
        attention="attention",
        attention_output="attention",
    ),
)


def supported_families() -> str:
    """Human list for error messages: ``BERT-style encoder, DistilBERT, ...``."""
    return ", ".join(f.name for f in FAMILIES)


def family_of(model: torch.nn.Module) -> Family | None:
    """The :class:`Family` whose paths resolve on ``model`` (its layout), or None."""
    base = base_of(model)
    for family in FAMILIES:
        blocks = get_path(base, family.layers)
        if not isinstance(blocks, torch.nn.ModuleList) or len(blocks) == 0:
            continue
        paths = [family.attention, family.attention_output, family.query, family.fused_qkv]
        if all(get_path(blocks[0], p) is not None for p in paths if p) and get_path(
            base, family.word_embeddings
        ):
            return family
    return None
