"""The per-layer magnitudes of one text: |h| of every hidden state, position and dim (Sun et al.
2024, Fig. 1 and 2), the view behind the page's "one text" tab and the CLI's ``--text``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isoscope.analysis.massive.params import MASSIVE_MAX_LENGTH
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import encode_text
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names


@dataclass(frozen=True)
class TextMagnitudes:
    """|h| of one text: ``magnitude`` float32 (S, T, d), ``tokens`` (T,) token strings.

    ``peak`` (S, T) is the largest |h| of each position, ``peak_dim`` (S, T) its dim.
    """

    state_names: tuple[str, ...]
    tokens: tuple[str, ...]
    magnitude: np.ndarray

    @property
    def peak(self) -> np.ndarray:
        return self.magnitude.max(axis=2)

    @property
    def peak_dim(self) -> np.ndarray:
        return self.magnitude.argmax(axis=2)

    def top_dims(self, state: int, k: int = 4) -> list[int]:
        """The ``k`` dims with the largest |h| anywhere in the text at ``state``."""
        per_dim = self.magnitude[state].max(axis=0)
        return [int(j) for j in np.argsort(-per_dim, kind="stable")[:k]]


def text_magnitudes(
    loaded: LoadedModel, text: str, max_length: int = MASSIVE_MAX_LENGTH.default
) -> TextMagnitudes:
    """|h| of every hidden state, position and dim for one text (Sun et al., Fig. 1 and 2)."""
    if not text.strip():
        raise InputError("give a non-empty text to inspect")
    hidden, table = encode_text(loaded, text, max_length)  # (S, T, d) float32
    return TextMagnitudes(
        tuple(hidden_state_names(loaded.info.num_layers)),
        tuple(str(t) for t in table.token),
        np.abs(hidden),
    )
