"""Tiny random models for the dimension card's tests: a zoo family built with config overrides
(an MLP bias, more layers, tied embeddings), saved and loaded through the real loader, so a test
can plant a known value in its parameters; the texts and the dimension the tests read."""

from __future__ import annotations

import torch

from isoscope.engine.load.models import load_model
from tests import zoo

TEXTS = [
    "the cat sat on the dog .",
    "a dog sat , the cat w1 w2 w3 !",
    "w5 w6 the cat ; w7 w8 w9 w10",
    "the dog",
]
D = 5


def load_tiny(tmp_path, module, family: str, **overrides):
    from transformers import AutoModel

    config = module.config_of(family)
    for key, value in overrides.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    model.save_pretrained(tmp_path, safe_serialization=True)
    zoo.tokenizer().save_pretrained(tmp_path)
    return load_model(str(tmp_path), device="cpu")
