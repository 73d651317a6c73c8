"""The queries/keys analysis's parameters, declared once (:class:`backend.engine.params.Interval`):
read by ``isoscope qk``'s options and the Positional information page's queries/keys view. A
module without torch, so that the CLI's option defaults load nothing heavy."""

from __future__ import annotations

from backend.engine.params import Interval

# Half the extraction's 128: the statistics are means over tokens, so 64 per text already average
# thousands of queries; the page runs the capture twice (trained and random init) while one waits,
# and never beyond the sidebar's own length.
QK_MAX_LENGTH = Interval(
    2, 8192, 64, integer=True, name="max_length", unit="tokens",
    help="tokens per text of the queries/keys capture (longer texts are cut)",
)  # fmt: skip
# Half the extraction's batch: eager attention (for the entropy) materialises each layer's
# batch x heads x length x length weights.
QK_BATCH_SIZE = Interval(
    1, 4096, 16, integer=True, name="batch_size", help="texts per batch of the capture at most"
)
