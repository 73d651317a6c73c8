"""The massive-activation scan's parameters, declared once (:class:`isoscope.engine.params.Interval`):
read by ``isoscope massive``'s options and the Decoder phenomena page's controls and links. A
module without torch, so that the CLI's option defaults load nothing heavy."""

from __future__ import annotations

from isoscope.engine.params import MAX_LENGTH, PAGE_LENGTHS, Interval

# The sidebar extraction's length: the scan reads the same window of each text as the
# hidden-state statistics shown beside it. The first token and the first delimiters, where Sun et
# al. find massive activations, lie inside it.
MASSIVE_MAX_LENGTH = Interval(
    2, 8192, MAX_LENGTH.default, integer=True, name="max_length", unit="tokens",
    help="tokens per text of the scan (longer texts are cut)", choices=PAGE_LENGTHS,
)  # fmt: skip
# Half the extraction's batch: the scan runs eager attention, whose batch x heads x length x
# length weights per layer the sink metric reads.
MASSIVE_BATCH_SIZE = Interval(
    1, 4096, 16, integer=True, name="batch_size", help="texts per batch of the scan at most"
)
# Twice the state's median patch (frame) norm: Darcet et al.'s high-norm tokens sit far above the
# bulk of the patches (their absolute cut of 150 is ViT-L/g's scale); a relative rule carries over
# to any width and layer.
HIGH_NORM_FACTOR = Interval(
    1.1, 100.0, 2.0, step=0.1, name="high_norm_factor",
    help="images / audio: a patch (frame) is high-norm above this factor x its state's median "
    "patch (frame) norm",
    citation="Darcet, Oquab, Mairal & Bojanowski 2024, Vision Transformers Need Registers, "
    "arXiv 2309.16588",
)  # fmt: skip
