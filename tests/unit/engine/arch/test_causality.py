"""Causal or not, from the model (isoscope.engine.arch.causality)."""

from __future__ import annotations

from isoscope.engine.arch import memo
from isoscope.engine.arch.causality import causal_by_definition, config_is_causal, is_causal
from tests.arch_models import tiny, tiny_config


def test_the_definition_tells_a_decoder_from_an_encoder():
    assert causal_by_definition(tiny("GPT2")) is True
    assert causal_by_definition(tiny("Bert")) is False


def test_is_causal_is_remembered_per_fingerprint():
    class Loaded:
        model = tiny("Bert")
        fingerprint = "test-causality-bert"

    memo.forget_all()
    assert is_causal(Loaded()) is False
    Loaded.model = tiny("GPT2")  # same fingerprint: the remembered answer
    assert is_causal(Loaded()) is False
    memo.forget_all()
    assert is_causal(Loaded()) is True


def test_a_config_alone_says_whether_it_builds_a_causal_model():
    assert config_is_causal(tiny_config("GPT2")) and not config_is_causal(tiny_config("Bert"))
