"""What one dimension card is asked for, validated once: :class:`DimensionSettings`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isoscope.analysis.dimension.params import (
    ABLATION_TEXTS,
    BATCH_SIZE,
    CONTEXT,
    CONTROLS,
    MAX_LENGTH,
    TOP_K,
)
from isoscope.engine.errors import InputError
from isoscope.engine.params import SEED


@dataclass(frozen=True)
class DimensionSettings:
    """One card: the hidden ``state`` (0 = embeddings .. L) and either a basis dimension ``dim``
    (0-based) or a ``direction`` u (a (d,) vector; the card reads h . u), never both.

    ``offset`` is a scalar added to the value (an SAE feature's pre-activation
    ``W_enc[f] . (x - b_dec) + b_enc`` is the direction ``W_enc[f]`` with offset
    ``b_enc - W_enc[f] . b_dec``); it appears as a row of its own in the contributions.
    ``label`` names the direction in titles (``"dim 223"`` by default). ``ablation_texts`` caps the
    texts the ablation runs on (0: none) and ``controls`` is the number of random dimensions
    ablated beside it."""

    state: int
    dim: int | None = None
    direction: np.ndarray | None = field(default=None, compare=False, repr=False)
    offset: float = 0.0
    label: str = ""
    top_k: int = TOP_K.default
    context: int = CONTEXT.default
    max_length: int = MAX_LENGTH.default
    batch_size: int = BATCH_SIZE.default
    ablation_texts: int = ABLATION_TEXTS.default
    controls: int = CONTROLS.default
    seed: int = SEED.default

    def __post_init__(self) -> None:
        if (self.dim is None) == (self.direction is None):
            raise InputError(
                "give either a dimension (dim, 0-based) or a direction (a vector of the model's "
                "width), not both and not neither"
            )
        if self.dim is not None and (isinstance(self.dim, bool) or int(self.dim) < 0):
            raise InputError(f"the dimension must be an integer >= 0, got {self.dim!r}")
        if self.state < 0:
            raise InputError(f"the state must be 0 (embeddings) or a layer >= 1, got {self.state}")
        if self.direction is not None:
            u = np.asarray(self.direction, dtype=np.float64)
            if u.ndim != 1 or not np.isfinite(u).all() or not np.abs(u).max(initial=0) > 0:
                raise InputError(
                    "the direction must be one finite, non-zero vector (a 1-D array of the "
                    f"model's width), got shape {tuple(u.shape)}"
                )
            object.__setattr__(self, "direction", u)
        if not np.isfinite(self.offset):
            raise InputError(f"the offset must be a finite number, got {self.offset}")
        for decl in (TOP_K, CONTEXT, MAX_LENGTH, BATCH_SIZE, ABLATION_TEXTS, CONTROLS, SEED):
            decl.check(getattr(self, decl.name))

    @property
    def title(self) -> str:
        """``dim 223``, or the direction's label."""
        if self.label:
            return self.label
        return f"dim {self.dim}" if self.dim is not None else "direction"

    def vector(self, width: int) -> np.ndarray:
        """u as a float64 (width,) vector: the basis vector of ``dim``, or the direction checked
        against the model's width."""
        if self.dim is not None:
            if self.dim >= width:
                raise InputError(
                    f"dimension {self.dim} does not exist: the model has {width} dimensions "
                    f"(0 to {width - 1})"
                )
            u = np.zeros(width)
            u[self.dim] = 1.0
            return u
        u = np.asarray(self.direction, dtype=np.float64)
        if u.shape != (width,):
            raise InputError(
                f"the direction has {u.shape[0]} entries but the model's hidden states have "
                f"{width}; give a vector of length {width}"
            )
        return u


def read_direction(path: str | Path) -> np.ndarray:
    """A direction from a ``.npy`` file (one 1-D float vector; pickled arrays are refused)."""
    path = Path(path)
    if path.suffix.lower() != ".npy" or not path.is_file():
        raise InputError(f"{path}: give an existing .npy file holding one 1-D vector")
    try:
        u = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: not a readable .npy array ({exc})") from None
    u = np.squeeze(np.asarray(u))
    if u.ndim != 1 or not np.issubdtype(u.dtype, np.number):
        raise InputError(f"{path}: holds an array of shape {u.shape}; give one 1-D vector")
    return u.astype(np.float64)
