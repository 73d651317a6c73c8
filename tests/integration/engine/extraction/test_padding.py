"""Padding measured, not assumed: a model whose real tokens move when a batch is padded (FNet's
Fourier mixing, ConvBERT's convolutions) is found so at load and runs unpadded, and its per-state
means over a padded corpus equal the means over its texts run one by one; for a model padding
leaves alone, padded batches give the same statistics as one text at a time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import transformers as tf

from tests import zoo

# mixed lengths, 1 to 13 tokens with the zoo's word-level tokenizer
TEXTS = [
    "the cat sat on the w3 . w7 w9",
    "a dog",
    "w11 w12 w13 the cat on a dog ; w20 w21 w22 w23 !",
    "the w4 .",
    "w5 w6 w7 w8 w9 w10",
    "dog",
    "a cat",
    "w1 w2 w3 w4 w5 w6",
]
SIZES = dict(
    vocab_size=zoo.V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=64, max_position_embeddings=64, pad_token_id=0,
)  # fmt: skip
MODELS = {  # name -> (config, does padding move its real tokens?)
    "fnet": (lambda: tf.FNetConfig(**SIZES), True),
    "convbert": (lambda: tf.ConvBertConfig(**SIZES), True),
    "bert": (lambda: tf.BertConfig(**SIZES), False),
    "gpt2": (lambda: tf.GPT2Config(vocab_size=zoo.V, n_embd=32, n_layer=2, n_head=2), False),
    "llama": (lambda: tf.LlamaConfig(**SIZES, num_key_value_heads=1), False),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("padding")
    out = {}
    for name, (config, _) in MODELS.items():
        torch.manual_seed(0)
        model = tf.AutoModel.from_config(config())
        model.save_pretrained(root / name, safe_serialization=True)
        zoo.tokenizer().save_pretrained(root / name)
        out[name] = root / name
    return out


def text_by_text(loaded) -> np.ndarray:
    """Per-state means over every token, each text run alone through the model (no padding),
    from the model's own outputs (state L: its ``last_hidden_state``)."""
    total, count = 0.0, 0
    for text in TEXTS:
        ids = loaded.tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            out = loaded.encoder(input_ids=ids, output_hidden_states=True)
        states = [*out.hidden_states[:-1], out.last_hidden_state]
        total = total + torch.stack(states)[:, 0].double().sum(1)
        count += ids.shape[1]
    return (total / count).numpy()


def means(loaded, batch_size: int) -> np.ndarray:
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text

    settings = ExtractionSettings(max_length=32, batch_size=batch_size, sample_size=8)
    return extract(loaded, corpus_from_text("\n".join(TEXTS)), settings).mean


@pytest.mark.parametrize("name", list(MODELS))
def test_padded_corpus_means_equal_text_by_text(name, folders):
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(folders[name]), device="cpu")
    sensitive = MODELS[name][1]
    assert loaded.layout.pad_with_mask is not sensitive
    assert ("padding moves" in loaded.info.token_layout) is sensitive
    truth = text_by_text(loaded)
    for batch_size in (1, 3, len(TEXTS)):  # one text, a few, all (most padding)
        assert np.abs(means(loaded, batch_size) - truth).max() < 1e-5, f"batch {batch_size}"


@pytest.mark.parametrize("name", ["fnet", "convbert"])
def test_the_same_corpus_padded_anyway_is_wrong(name, folders):
    """The check can fail: forcing padded batches on a pad-sensitive model moves the means."""
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(folders[name]), device="cpu")
    padded = dataclasses.replace(
        loaded, layout=dataclasses.replace(loaded.layout, pad_with_mask=True)
    )
    assert np.abs(means(padded, len(TEXTS)) - text_by_text(loaded)).max() > 1e-4


def test_a_pad_sensitive_extraction_says_so(folders):
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(folders["fnet"]), device="cpu")
    result = extract(loaded, corpus_from_text("\n".join(TEXTS)), ExtractionSettings(max_length=32))
    assert any("padding moves this model's real tokens" in n for n in result.notices)


@pytest.mark.parametrize("name", ["fnet", "bert"])
def test_every_batch_plan_keeps_one_length_for_a_pad_sensitive_model(name, folders):
    from isoscope.engine.budget.batching import plan_batches
    from isoscope.engine.extraction import tokenize
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(folders[name]), device="cpu")
    tokenized = tokenize(loaded, tuple(TEXTS), 32)
    batches = plan_batches(tokenized.lengths, 8, group=tokenized.group)
    widths = [len(set(tokenized.lengths[b].tolist())) for b in batches]
    assert (max(widths) == 1) is (name == "fnet")
