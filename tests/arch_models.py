"""Tiny random transformers models for the architecture-map tests (tests/unit/engine/arch/)."""

from __future__ import annotations

from typing import Any

import torch
import transformers as tf

SIZES = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
)


def tiny_config(family: str, **overrides: Any) -> Any:
    """``tf.<family>Config`` (``"Bert"``, ``"GPT2"``, ``"Llama"``...) of :data:`SIZES`, with
    ``overrides``."""
    return getattr(tf, f"{family}Config")(**{**SIZES, **overrides})


def tiny(family: str, cls: str = "Model", **overrides: Any) -> torch.nn.Module:
    """An eval-mode random ``tf.<family><cls>`` of :func:`tiny_config`."""
    return getattr(tf, f"{family}{cls}")(tiny_config(family, **overrides)).eval()
