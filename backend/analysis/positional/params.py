"""The positional analyses' parameters, declared once (:class:`isoscope.engine.params.Interval`):
the queries/keys capture (``isoscope qk``), the position probe and TUPE (``isoscope positional``)
and the variance lab (``isoscope nope``), read by those commands' options, the Positional
information page's controls and the settings dataclasses' checks. A module without torch, so that
the CLI's option defaults load nothing heavy."""

from __future__ import annotations

from isoscope.engine.params import Interval

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

# ----------------------------------------------------------------------------- the position probe
# Luo et al.'s probe predicts the absolute position: 64 classes put chance at 1/64, and later
# positions are rare in a corpus of sentences (few texts reach them, too few tokens to train on).
MAX_POSITION = Interval(
    2, 8192, 64, integer=True, name="max_position", unit="positions",
    help="the probe's classes: tokens at this position or later are left out",
)  # fmt: skip
# A fifth of the texts held out: the accuracy is measured on texts the probe never saw.
TEST_FRACTION = Interval(
    0.05, 0.8, 0.2, step=0.05, name="test_fraction", help="share of texts held out for the probe"
)
# 30 L-BFGS iterations per hidden state bound the probe's time; raise them if accuracy still climbs.
PROBE_ITER = Interval(
    1, 1000, 30, integer=True, name="probe_iter", choices=(10, 20, 30, 60, 100),
    help="L-BFGS iterations of the probe per hidden state",
)  # fmt: skip
# 32 texts for TUPE's term shares: one first-layer pass each, cheap enough to run while one waits.
TUPE_TEXTS = Interval(
    1, 10_000, 32, integer=True, name="tupe_texts", unit="texts",
    help="texts decomposed for the TUPE term shares",
)  # fmt: skip

# ----------------------------------------------------------------------------- the variance lab
# Chi et al.'s random NoPE models: a small GPT-2 (d = 256, 4 layers of 4 heads) already shows the
# 1/m variance shrinkage; 512 positions give the log-log fit two decades (4 .. 512).
NOPE_D_MODEL = Interval(
    8, 4096, 256, integer=True, name="d_model", choices=(64, 128, 256, 512), help="model width d"
)
NOPE_LAYERS = Interval(1, 48, 4, integer=True, name="layers", help="layers of the random models")
NOPE_HEADS = Interval(1, 64, 4, integer=True, name="heads", help="attention heads per layer")
NOPE_SEQ_LEN = Interval(
    8, 8192, 512, integer=True, name="seq_len", choices=(64, 128, 256, 512, 1024, 2048),
    help="positions per random sequence",
)  # fmt: skip
# Three seeds: a mean +- std over random models, each a few random forward passes.
NOPE_SEEDS = Interval(
    1, 50, 3, integer=True, name="seeds", help="random models (and inputs) averaged over"
)
# GPT-2's initializer_range.
NOPE_INIT_STD = Interval(
    0.001, 1.0, 0.02, name="init_std", choices=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2),
    help="initializer_range (GPT-2 init)",
)  # fmt: skip
NOPE_BATCH = Interval(1, 256, 2, integer=True, name="batch", help="random sequences per seed")
# The fit starts at position 4: the first few positions average too few values for the 1/m law.
NOPE_FIT_FROM = Interval(
    1, 8191, 4, integer=True, name="fit_from",
    help="first position (1-based) of the log-log slope fit",
)  # fmt: skip
