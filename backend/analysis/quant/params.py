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
