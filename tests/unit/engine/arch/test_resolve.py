"""Resolving a model's modules (isoscope.engine.arch.resolve); the per-family cases are in
tests/unit/engine/test_arch.py."""

from __future__ import annotations

import pytest

from isoscope.engine.arch.resolve import architecture
from isoscope.engine.arch.tracing import wiring
from isoscope.engine.errors import UnsupportedModelError
from tests.arch_models import tiny


def test_heads_and_scaling_come_from_the_config():
    arch = architecture(tiny("Llama", hidden_size=32, num_attention_heads=4, num_key_value_heads=2))
    assert (arch.num_heads, arch.num_kv_heads, arch.head_dim) == (4, 2, 8)
    assert arch.scaling(arch.layers[0]) == pytest.approx(8**-0.5)
    assert arch.path(arch.layers[0].query) == "layers.0.self_attn.q_proj"


def test_a_variant_missing_a_projection_names_it():
    model = tiny("Llama", num_hidden_layers=2)
    wiring(model)  # traced while whole (one trace per model object)
    del model.layers[1].self_attn.k_proj
    with pytest.raises(UnsupportedModelError, match="layer 2 has no self_attn.k_proj"):
        architecture(model)
