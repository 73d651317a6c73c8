"""Shared by the quantization tests: a few short texts, and checks that a model is left exactly as
it was (weights, hooks)."""

from __future__ import annotations

import torch

TEXTS = [
    "Summer is warm. Winter is cold.",
    "The cat sat on the mat and looked at the dog.",
    "Rivers run to the sea, and the sea does not fill.",
    "A fourth text, with commas, numbers 1 2 3, and a question?",
]


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _ours(hooks) -> list:
    """The hooks isoscope placed: transformers installs its own output-capturing hooks once, on
    the first forward that asks for hidden states, and keeps them; those are the model's."""
    return [
        h for h in hooks.values() if not getattr(h, "__module__", "").startswith("transformers")
    ]


def hook_counts(model: torch.nn.Module) -> dict[str, tuple[int, int]]:
    return {
        name: (len(_ours(m._forward_hooks)), len(_ours(m._forward_pre_hooks)))
        for name, m in model.named_modules()
        if _ours(m._forward_hooks) or _ours(m._forward_pre_hooks)
    }


def no_hooks(model: torch.nn.Module) -> bool:
    return all(
        not _ours(m._forward_hooks) and not _ours(m._forward_pre_hooks) for m in model.modules()
    )
