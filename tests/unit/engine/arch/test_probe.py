"""The random input of one traced pass (isoscope.engine.arch.probe)."""

from __future__ import annotations

import torch

from isoscope.engine.arch.probe import TRACE_TOKENS, trace_forward, trace_ids
from tests.arch_models import tiny


def _gpt2(vocab=50):
    return tiny("GPT2", vocab_size=vocab)


def test_trace_ids_are_seeded_and_inside_the_vocabulary():
    model = _gpt2()
    ids = trace_ids(model)
    assert ids.shape == (1, TRACE_TOKENS) and torch.equal(ids, trace_ids(model))
    assert int(ids.min()) >= 5 and int(ids.max()) < 50
    assert not torch.equal(ids, trace_ids(model, seed=1))


def test_the_traced_pass_feeds_text_and_images():
    text = trace_forward(_gpt2())
    assert text.last_hidden_state.shape == (1, TRACE_TOKENS, 16)
    vit = tiny("ViT", image_size=32, patch_size=16)
    assert trace_forward(vit).last_hidden_state.shape == (1, 5, 16)  # 4 patches + [CLS]
