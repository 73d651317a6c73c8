"""Finding things inside a model: a module by its dotted path, the base model, the list of
Transformer blocks, a module's path, and the one-line description used in error messages."""

from __future__ import annotations

from typing import Any, cast

import torch


def describe(model: torch.nn.Module) -> str:
    """``LlamaModel (llama)``: the class and ``model_type`` named in error messages."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return f"{type(model).__name__} ({model_type or 'no model_type'})"


def get_path(root: torch.nn.Module, path: str | None) -> Any:
    if path is None:
        return None
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def base_of(model: torch.nn.Module) -> torch.nn.Module:
    base = getattr(model, "base_model", None)
    return base if isinstance(base, torch.nn.Module) else model


def module_of(model_or_loaded: Any) -> torch.nn.Module:
    return getattr(model_or_loaded, "model", model_or_loaded)


def input_device(model: torch.nn.Module) -> torch.device:
    try:
        return cast(Any, model).get_input_embeddings().weight.device
    except Exception:
        return next(model.parameters()).device


def blocks_of(model: torch.nn.Module) -> tuple[str, torch.nn.ModuleList] | None:
    """``(path, module list)`` of the Transformer blocks: the ``nn.ModuleList`` of
    ``num_hidden_layers`` modules inside the base model (None when the layers share one module,
    as in ALBERT)."""
    n = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    base = base_of(model)
    prefix = path_in(model, base)
    for name, module in base.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n and n > 0:
            return ".".join(p for p in (prefix, name) if p), module
    return None


def path_in(model: torch.nn.Module, module: torch.nn.Module) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name
    raise KeyError(f"{type(module).__name__} is not part of this model")
