"""The LayerNorm outlier thresholds, in a module without torch so that the CLI's option defaults
(``ablate --k/--share``) read them without loading torch. Re-exported by
:mod:`backend.analysis.layernorm.params`, where the rule itself lives."""

from __future__ import annotations

from dataclasses import dataclass

from backend.engine.errors import InputError


@dataclass(frozen=True)
class LayerNormThresholds:
    """BERT Busters' LayerNorm outlier rule (Kovaleva et al. 2021, arXiv 2105.06990): per norm, a
    gamma_j or beta_j more than ``k`` std from that norm's mean is flagged; dim j is an outlier
    when it is flagged in at least ``share`` of the norms. The defaults every page, command and
    report use (like :class:`backend.analysis.geometry.outliers.OutlierThresholds`)."""

    k: float = 3.0
    share: float = 0.5

    def __post_init__(self) -> None:
        if not self.k > 0:
            raise InputError(f"k (standard deviations) must be positive, got {self.k}")
        if not 0 < self.share <= 1:
            raise InputError(f"the share of layers must be in (0, 1], got {self.share}")


LN_THRESHOLDS = LayerNormThresholds()
