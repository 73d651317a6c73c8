"""Tiny random models and parameter snapshots for the LayerNorm ablation tests
(tests/unit/analysis/layernorm/ablation/)."""

from __future__ import annotations

import torch

from isoscope.engine.load.models import ModelParts, build_random_model, make_loaded

TEXTS = [
    "the cat sat on the mat .",
    "a dog barked twice",
    "rain again today , sadly",
    "one more short line",
]


def tiny_model():
    return build_random_model("bert", {"layers": 2, "width": 32, "heads": 2, "seed": 0}, 200).eval()


def tiny_loaded_model():
    """A 2-layer random BERT with the bundled tokenizer, as a LoadedModel on the CPU."""
    from isoscope.engine.load.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    model = build_random_model(
        "bert", {"layers": 2, "width": 32, "heads": 2, "seed": 1}, len(tokenizer)
    )
    parts = ModelParts(
        model=model,
        tokenizer=tokenizer,
        source="tiny",
        display="tiny",
        fingerprint="t",
        random=True,
    )
    return make_loaded(parts, torch.device("cpu"), torch.float32)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
