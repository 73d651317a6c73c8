"""The quantization analysis's parameters, declared once (:class:`backend.engine.params.Interval`):
read by ``isoscope quant``'s options, the Quantization page's widgets and the links that carry
them. A module without torch, so that the CLI's option defaults load nothing heavy."""

from __future__ import annotations

from backend.engine.params import DETTMERS_2022, Interval

XIAO_2023 = (
    "Xiao, Lin, Seznec, Wu, Demouth & Han 2023, SmoothQuant: Accurate and Efficient Post-Training "
    "Quantization for Large Language Models, arXiv 2211.10438"
)

KEEP_K = Interval(
    0, 4096, 6, integer=True, name="keep", unit="channels",
    help="keep-K: input channels kept in full precision", citation=DETTMERS_2022,
)  # fmt: skip
SMOOTHQUANT_ALPHA = Interval(
    0.0, 1.0, 0.5, step=0.05, name="alpha",
    help="SmoothQuant migration strength", citation=XIAO_2023,
)  # fmt: skip
IGNORE_SHARE = Interval(
    0.0, 1.0, 0.5, step=0.05, name="ignore_share",
    help="the recipe keeps the most sensitive blocks in full precision until they make up this "
    "share of the summed per-block loss (0: keep none)",
)  # fmt: skip
# The α grid the analysis sweeps on the one scan when no α is given: SmoothQuant's paper
# finds 0.4-0.6 best for most models and up to 0.75-0.85 for GLM-130B / Llama-class outliers.
ALPHA_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def check_keep_alpha(keep: int, alpha: float) -> None:
    """keep-K and α against their declarations (:class:`~backend.engine.errors.InputError`
    naming the flag)."""
    KEEP_K.check(keep, KEEP_K.flag)
    SMOOTHQUANT_ALPHA.check(alpha, SMOOTHQUANT_ALPHA.flag)
