"""The dimension card's parameters, declared once (:class:`isoscope.engine.params.Interval`): read
by :class:`~isoscope.analysis.dimension.settings.DimensionSettings`, the command's options and the
page's widgets and links."""

from __future__ import annotations

from isoscope.engine.params import Interval

TOP_K = Interval(
    1, 100, 10, integer=True, name="top_k", help="tokens listed at each end of the dimension"
)
CONTEXT = Interval(
    0,
    20,
    4,
    integer=True,
    name="context",
    help="tokens of context shown on each side of a top token",
)
MAX_LENGTH = Interval(
    8, 8192, 128, integer=True, name="max_length", help="tokens per text (longer texts are cut)"
)
BATCH_SIZE = Interval(1, 1024, 16, integer=True, name="batch_size", help="texts per forward pass")
ABLATION_TEXTS = Interval(
    0,
    10_000,
    32,
    integer=True,
    name="ablation_texts",
    help="texts of the corpus the ablation runs on (each ablation is a forward pass over them; "
    "0: no ablation)",
)
CONTROLS = Interval(
    0,
    50,
    5,
    integer=True,
    name="controls",
    help="random dimensions ablated the same way, as controls",
)
HISTOGRAM_BINS = 40
POSITION_BINS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # lower edges of the position bins
