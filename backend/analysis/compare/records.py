"""What a comparison holds: the per-state figures of one side (:class:`SideSummary`), LayerNorm
parameter differences (:class:`LNDifference`) and the whole :class:`Comparison`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isoscope.analysis.compare.cka import CKAResult


@dataclass(frozen=True)
class SideSummary:
    """Per-state figures of one extraction (one side of a comparison), all (S,) or per state.

    ``top_share`` is the share of the mean cosine carried by the ``top_k`` dims with the largest
    contribution (Timkey & van Schijndel), ``top_dims`` those dims.
    """

    label: str
    model: dict
    corpus_name: str
    state_names: tuple[str, ...]
    anisotropy: np.ndarray
    isoscore: np.ndarray
    outliers: tuple[tuple[int, ...], ...]
    mean: np.ndarray
    top_k: int
    top_share: np.ndarray
    top_dims: tuple[tuple[int, ...], ...]

    @property
    def num_states(self) -> int:
        return len(self.state_names)

    @property
    def hidden_size(self) -> int:
        return int(self.mean.shape[1])


@dataclass(frozen=True)
class LNDifference:
    """gamma_B - gamma_A and beta_B - beta_A per (norm, dim): float64 (n_norms, d)."""

    names: list[str]
    d_gamma: np.ndarray
    d_beta: np.ndarray

    def moved_dims(self, top: int = 10) -> list[tuple[int, float]]:
        """The ``top`` dims whose gamma or beta moved most (largest |difference| over the norms)."""
        moved = np.maximum(np.abs(self.d_gamma).max(axis=0), np.abs(self.d_beta).max(axis=0))
        order = np.argsort(-moved, kind="stable")[:top]
        return [(int(j), float(moved[j])) for j in order]

    def to_frame(self):
        import pandas as pd

        n, d = self.d_gamma.shape
        return pd.DataFrame(
            {
                "norm": np.repeat(self.names, d),
                "dim": np.tile(np.arange(d), n),
                "d_gamma": self.d_gamma.ravel(),
                "d_beta": self.d_beta.ravel(),
            }
        )


@dataclass(frozen=True)
class Comparison:
    """Everything the Compare page and ``isoscope compare`` show for A vs B."""

    a: SideSummary
    b: SideSummary
    states: list[dict]
    cka: CKAResult | None
    abs_mean_diff: np.ndarray | None
    ln: LNDifference | None
    notes: tuple[str, ...] = ()
    sts_a: np.ndarray | None = None
    sts_b: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
