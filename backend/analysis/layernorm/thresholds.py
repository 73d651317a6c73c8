"""The LayerNorm outlier thresholds and the ablation's random controls, declared once
(:class:`isoscope.engine.params.Interval`): the defaults and ranges of ``ablate --k/--share/
--random-controls``, the LayerNorm page's controls and its links, and the checks of
:class:`LayerNormThresholds`. A module without torch so that the CLI's option defaults
read them without loading torch. Re-exported by :mod:`isoscope.analysis.layernorm.params`, where the
rule itself lives."""

from __future__ import annotations

from dataclasses import dataclass

from isoscope.engine.params import Interval

KOVALEVA_2021 = (
    "Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, BERT Busters: Outlier Dimensions that "
    "Disrupt Transformers, arXiv 2105.06990"
)
# 3 standard deviations from the norm's mean, BERT Busters' rule; below 1 most dims would count.
LN_K = Interval(
    1.0, 10.0, 3.0, step=0.5, name="k", help="detection: standard deviations from the LayerNorm's mean",
    citation=KOVALEVA_2021,
)  # fmt: skip
# Half the norms, BERT Busters' rule: a dim that one odd norm flags is not an outlier dim.
LN_SHARE = Interval(
    0.05, 1.0, 0.5, step=0.05, name="share", help="detection: share of LayerNorms that must flag a dim",
    citation=KOVALEVA_2021,
)  # fmt: skip

# Three random dim sets: a mean +- std to compare the ablation with, while each set costs one more
# pass over the corpus on the page.
RANDOM_CONTROLS = Interval(
    0, 100, 3, integer=True, name="random_controls",
    help="random dim sets of the same size (one seed each)",
)  # fmt: skip


@dataclass(frozen=True)
class LayerNormThresholds:
    """BERT Busters' LayerNorm outlier rule (Kovaleva et al. 2021): per norm, a gamma_j or beta_j
    more than ``k`` std from that norm's mean is flagged; dim j is an outlier when it is flagged in
    at least ``share`` of the norms. Defaults and ranges from :data:`LN_K` and :data:`LN_SHARE`
    (like :class:`isoscope.analysis.outliers.OutlierThresholds`)."""

    k: float = LN_K.default
    share: float = LN_SHARE.default

    def __post_init__(self) -> None:
        LN_K.check(self.k, "k (standard deviations)")
        LN_SHARE.check(self.share, "the share of LayerNorms")


LN_THRESHOLDS = LayerNormThresholds()
