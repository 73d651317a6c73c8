"""Causal or not, measured on the model: the definition (changing the last token leaves every
earlier position's hidden states as they were, :mod:`isoscope.engine.arch.behaviour`), the
attention modules' own ``is_causal`` flags only where that probe cannot tell. A flag alone
would miss a causal text tower whose modules carry none (the mask is passed per call)."""

from __future__ import annotations

from typing import Any

import torch

from isoscope.engine.arch.behaviour import behaviour
from isoscope.engine.arch.lookup import base_of, blocks_of, module_of
from isoscope.engine.arch.memo import CAUSAL
from isoscope.engine.arch.probe import TRACE_TOKENS, forward_ids, trace_ids


def _flags(model: torch.nn.Module) -> list[bool]:
    found = blocks_of(model)
    root = found[1] if found is not None else model
    return [
        bool(m.is_causal)
        for m in root.modules()
        if isinstance(getattr(m, "is_causal", None), bool) and m is not model
    ]


def causal_by_definition(model: torch.nn.Module, n: int = TRACE_TOKENS) -> bool:
    """The definition: changing the last token leaves every earlier position's hidden states
    unchanged (one forward pass of two texts that differ only in their last token)."""
    ids = trace_ids(model, n)
    other = ids.clone()
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    low = min(5, max(vocab - 2, 0))
    other[0, -1] = low + (int(ids[0, -1]) - low + 1) % max(vocab - low, 1)
    with torch.inference_mode():
        a = forward_ids(base_of(model), ids, output_hidden_states=True).hidden_states
        b = forward_ids(base_of(model), other, output_hidden_states=True).hidden_states
    return all(
        torch.allclose(x[:, :-1].float(), y[:, :-1].float(), rtol=1e-4, atol=1e-5)
        for x, y in zip(a, b, strict=True)
    )


def is_causal(model_or_loaded: Any) -> bool:
    """Whether the model is causal, by its behaviour on the probe of
    :func:`isoscope.engine.arch.behaviour.behaviour`; the attention modules' ``is_causal`` flags
    where the probe cannot tell. Cached per model."""
    model = module_of(model_or_loaded)
    return CAUSAL.get_or_compute(model_or_loaded, lambda: _decide(model))


def _decide(model: torch.nn.Module) -> bool:
    measured = behaviour(model).causal
    return measured if measured is not None else any(_flags(model))


def config_is_causal(config: Any) -> bool:
    """Whether a config (no weights) builds a causal model: the attention modules' flags of the
    model built on the meta device; without flags, what the config itself says (``is_decoder``,
    a ``*ForCausalLM`` architecture)."""
    from transformers import AutoModel

    try:
        with torch.device("meta"):
            model = AutoModel.from_config(config, trust_remote_code=False)
        flags = _flags(model)
    except Exception:
        flags = []
    if flags:
        return any(flags)
    archs = getattr(config, "architectures", None) or []
    return bool(
        getattr(config, "is_decoder", False)
        or any(a.endswith("ForCausalLM") or "LMHead" in a for a in archs)
    )
