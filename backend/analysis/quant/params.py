"""The quantization analysis's parameters, declared once (:class:`isoscope.engine.params.Interval`):
read by ``isoscope quant``'s options, the Quantization page's widgets and the links that carry
them. A module without torch, so that the CLI's option defaults load nothing heavy."""

from __future__ import annotations

from isoscope.engine.params import DETTMERS_2022, MAX_LENGTH, PAGE_LENGTHS, Interval

XIAO_2023 = (
    "Xiao, Lin, Seznec, Wu, Demouth & Han 2023, SmoothQuant: Accurate and Efficient Post-Training "
    "Quantization for Large Language Models, arXiv 2211.10438"
)

# The sidebar extraction's length: the outlier dims each site's overlap compares with come from
# that extraction, so the scan reads the same window of each text.
QUANT_MAX_LENGTH = Interval(
    2, 8192, MAX_LENGTH.default, integer=True, name="max_length", unit="tokens",
    help="tokens per text of the scan (longer texts are cut)", choices=PAGE_LENGTHS,
)  # fmt: skip
# Half the extraction's batch: hooks hold the input of every projection of a batch at once.
QUANT_BATCH_SIZE = Interval(
    1, 4096, 16, integer=True, name="batch_size", help="texts per batch of the scan at most"
)
# 256 tokens (a seeded uniform sample) per site: the simulated error of every scheme at every
# site is a matrix product per token, so the sample bounds the analysis's time.
ERROR_TOKENS = Interval(
    1, 1_000_000, 256, integer=True, name="error_tokens", unit="tokens",
    help="tokens (a seeded uniform sample) the per-site errors and medians are computed on",
)  # fmt: skip
# 256 tokens of the first texts: the end metric and the sensitivity run the model once per scheme
# and once per block, so they bound the analysis's time the most.
END_TOKENS = Interval(
    1, 1_000_000, 256, integer=True, name="end_tokens", unit="tokens",
    help="the end metric and sensitivity use the first texts up to this many tokens",
)  # fmt: skip
# Dettmers et al. find the outlier features in about 6 hidden dims at 6.7B parameters.
KEEP_K = Interval(
    0, 4096, 6, integer=True, name="keep", unit="channels",
    help="keep-K: input channels kept in full precision", citation=DETTMERS_2022,
)  # fmt: skip
# SmoothQuant's α = 0.5 splits the difficulty evenly between activations and weights (Xiao et
# al.); the analysis sweeps ALPHA_GRID around it unless an α is chosen.
SMOOTHQUANT_ALPHA = Interval(
    0.0, 1.0, 0.5, step=0.05, name="alpha",
    help="SmoothQuant migration strength", citation=XIAO_2023,
)  # fmt: skip
# Half the summed per-block loss: the recipe recovers the larger part of the measured loss with
# the fewest blocks kept in full precision.
IGNORE_SHARE = Interval(
    0.0, 1.0, 0.5, step=0.05, name="ignore_share",
    help="the recipe keeps the most sensitive blocks in full precision until they make up this "
    "share of the summed per-block loss (0: keep none)",
)  # fmt: skip
# The α grid the analysis sweeps on the one scan when no α is given: SmoothQuant's paper
# finds 0.4-0.6 best for most models and up to 0.75-0.85 for GLM-130B / Llama-class outliers.
ALPHA_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def check_keep_alpha(keep: int, alpha: float) -> None:
    """keep-K and α against their declarations (:class:`~isoscope.engine.errors.InputError`
    naming the flag)."""
    KEEP_K.check(keep, KEEP_K.flag)
    SMOOTHQUANT_ALPHA.check(alpha, SMOOTHQUANT_ALPHA.flag)
