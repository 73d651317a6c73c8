"""What a loader hands to :func:`isoscope.engine.load.models.make_loaded`: a model built or read, before it
is put on its device and given its model card."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class ModelParts:
    """One model as a loader produced it (a checkpoint folder, a ``random:`` family, a
    ``random-like:`` copy).

    ``source`` is the canonical source string, ``display`` the card's name, ``fingerprint`` the
    cache key before the dtype is appended; ``weights_dir`` the checkpoint folder (None when built
    at random); ``random`` whether the weights are a random initialisation; ``spec`` how to build
    the model again (Ray workers); ``path`` / ``revision`` the provenance of what the user opened
    (:class:`isoscope.engine.load.models.ModelInfo`); ``weights`` the card's line on where the
    weights came from, as the checkpoint load measured it
    (:mod:`isoscope.engine.load.weight_check`; "" for a model built at random)."""

    model: torch.nn.Module
    tokenizer: Any
    source: str
    display: str
    fingerprint: str
    random: bool
    weights_dir: Path | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    processor: Any = None
    path: str | None = None
    revision: str | None = None
    weights: str = ""


def short_error(exc: BaseException) -> str:
    """The first line of an exception's message (at most 300 characters), for a one-line error."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
