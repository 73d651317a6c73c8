"""Causal or not, from the model (backend.engine.arch.causality)."""

from __future__ import annotations

import transformers as tf

from backend.engine.arch import memo
from backend.engine.arch.causality import causal_by_definition, config_is_causal, is_causal

BERT = tf.BertConfig(
    vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
)
GPT2 = tf.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)


def test_the_definition_tells_a_decoder_from_an_encoder():
    assert causal_by_definition(tf.GPT2Model(GPT2).eval()) is True
    assert causal_by_definition(tf.BertModel(BERT).eval()) is False


def test_is_causal_is_remembered_per_fingerprint():
    class Loaded:
        model = tf.BertModel(BERT).eval()
        fingerprint = "test-causality-bert"

    memo.forget_all()
    assert is_causal(Loaded()) is False
    Loaded.model = tf.GPT2Model(GPT2).eval()  # same fingerprint: the remembered answer
    assert is_causal(Loaded()) is False
    memo.forget_all()
    assert is_causal(Loaded()) is True


def test_a_config_alone_says_whether_it_builds_a_causal_model():
    assert config_is_causal(GPT2) and not config_is_causal(BERT)
