"""What a model does to the probe (isoscope.engine.arch.behaviour): causal, and whether padding
moves its real tokens, measured rather than read from module attributes."""

from __future__ import annotations

import pytest

from isoscope.engine.arch import memo
from isoscope.engine.arch.behaviour import measure
from isoscope.engine.arch.causality import _flags, is_causal
from tests.arch_models import tiny

# token mixers that read the whole padded length whatever the mask says
PAD_SENSITIVE = [("FNet", {}), ("ConvBert", {})]
# attention with a mask, causal or not: pads never reach a real token
PAD_HARMLESS = [
    ("Bert", {}),
    ("GPT2", dict(n_embd=16, n_layer=1, n_head=2)),
    ("Llama", dict(num_key_value_heads=2)),
    ("CLIPText", {}),
    ("Roberta", dict(pad_token_id=1)),
]


@pytest.mark.parametrize(("family", "extra"), PAD_SENSITIVE)
def test_a_mixer_over_the_padded_length_is_found_pad_sensitive(family, extra):
    found = measure(tiny(family, **extra))
    assert found.pads_move_tokens and "moves by" in found.why


@pytest.mark.parametrize(("family", "extra"), PAD_HARMLESS)
def test_masked_attention_is_found_pad_harmless(family, extra):
    found = measure(tiny(family, **extra))
    assert not found.pads_move_tokens, found.why
    assert set(found.sequence_axes) == {1}  # (B, T, d) states


@pytest.mark.parametrize(
    ("family", "extra", "causal"),
    [
        ("Bert", {}, False),
        ("GPT2", dict(n_embd=16, n_layer=1, n_head=2), True),
        ("FNet", {}, False),
        ("CLIPText", {}, True),  # causal mask passed per call; its modules say is_causal=False
    ],
)
def test_causal_is_measured_not_read_from_flags(family, extra, causal):
    model = tiny(family, **extra)
    memo.forget_all()
    assert measure(model).causal is causal
    assert is_causal(model) is causal


def test_the_clip_text_tower_carries_flags_that_would_say_otherwise():
    assert _flags(tiny("CLIPText")) and not any(_flags(tiny("CLIPText")))


def test_a_probe_that_cannot_run_counts_as_pad_sensitive():
    model = tiny("Bert")

    def broken(*args, **kwargs):
        raise RuntimeError("no")

    model.forward = broken
    found = measure(model)
    assert found.pads_move_tokens and found.causal is None and "failed" in found.why
