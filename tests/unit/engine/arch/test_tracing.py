"""The traced forward pass (isoscope.engine.arch.tracing): roles from the wiring of a pre-LN and a
post-LN model, and one trace per model object."""

from __future__ import annotations

import pytest
import torch

from isoscope.engine.arch import memo
from isoscope.engine.arch.tracing import projection_inputs, wiring
from isoscope.engine.errors import UnsupportedModelError
from tests.arch_models import tiny


def test_pre_and_post_ln_roles():
    gpt2 = tiny("GPT2", num_hidden_layers=2)
    wired = wiring(gpt2)
    assert not wired.post_ln and wired.blocks == "h" and wired.num_layers == 2
    assert [(n.path, n.role) for n in wired.norms if n.layer == 0] == [
        ("h.0.ln_1", "pre_attn"),
        ("h.0.ln_2", "pre_mlp"),
    ]
    assert wired.norms[-1].role == "final" and wired.norms[-1].kind == "layernorm"
    bert = tiny("Bert", num_hidden_layers=2)
    roles = [n.role for n in wiring(bert).norms]
    assert wiring(bert).post_ln and roles[0] == "emb" and roles[1:3] == ["attn", "out"]


def test_one_trace_per_model_object():
    memo.forget_all()
    gpt2 = tiny("GPT2")
    assert wiring(gpt2) is wiring(gpt2) and projection_inputs(gpt2) is projection_inputs(gpt2)


def test_a_model_without_blocks_is_refused():
    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = type("C", (), {"model_type": "flat", "num_hidden_layers": 2})()
            self.norm = torch.nn.LayerNorm(4)

    with pytest.raises(UnsupportedModelError, match="Flat \\(flat\\) has no list of 2"):
        wiring(Flat())
