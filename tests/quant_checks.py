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


def hook_counts(model: torch.nn.Module) -> dict[str, tuple[int, int]]:
    return {
        name: (len(m._forward_hooks), len(m._forward_pre_hooks))
        for name, m in model.named_modules()
        if m._forward_hooks or m._forward_pre_hooks
    }


def no_hooks(model: torch.nn.Module) -> bool:
    return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
