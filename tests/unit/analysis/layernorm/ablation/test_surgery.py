"""Ablation surgery: zeroing LayerNorm dims and restoring them bit-for-bit (also on error), the
forward-hook masks that equal zeroed parameters, dim parsing and the random control dims."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.layernorm.ablation.surgery import (
    ablated,
    masked_norms,
    parse_dims,
    random_control_dims,
)
from isoscope.analysis.layernorm.params import find_norms, select_norms
from isoscope.engine.errors import InputError
from tests.ablation_models import same, snapshot, tiny_model


def test_ablated_zeroes_only_chosen_dims_in_output_norms():
    model = tiny_model()
    before = snapshot(model)
    with ablated(model, [3, 7]) as sites:
        assert [s.name for s in sites] == ["L1.out_ln", "L2.out_ln"]
        for s in sites:
            assert (
                s.module.weight[[3, 7]].abs().sum() == 0 and s.module.bias[[3, 7]].abs().sum() == 0
            )
            assert torch.equal(s.module.weight[:3], before[s.path + ".weight"][:3])
        attn = find_norms(model)[1]
        assert torch.equal(attn.module.weight, before[attn.path + ".weight"])
    assert same(before, snapshot(model))


def test_restored_bit_for_bit_when_body_raises():
    model = tiny_model()
    with torch.no_grad():  # awkward values that a multiply-and-divide restore would not reproduce
        for s in find_norms(model):
            s.module.weight.copy_(torch.randn(32) * 1e-30 + 0.1)
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="boom"), ablated(model, [0, 31], "all"):
        raise RuntimeError("boom")
    assert same(before, snapshot(model))


def test_masked_norms_equals_zeroed_parameters():
    model = tiny_model()
    ids = torch.randint(5, 200, (3, 9), generator=torch.Generator().manual_seed(0))
    sites = select_norms(find_norms(model), None)
    with torch.no_grad():
        with ablated(model, [4], sites):
            expected = model(input_ids=ids).last_hidden_state
        mask = torch.ones(3, 1, 32)
        mask[:, 0, 4] = 0
        with masked_norms(sites, mask):
            got = model(input_ids=ids).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert not model._forward_hooks and not any(s.module._forward_hooks for s in sites)


def test_parse_dims():
    assert parse_dims("223, 127,127", 384) == [127, 223]
    with pytest.raises(InputError, match="not an integer"):
        parse_dims("abc", 384)
    with pytest.raises(InputError, match="out of range"):
        parse_dims("384", 384)
    with pytest.raises(InputError):
        parse_dims("", 384)


def test_random_controls_are_reproducible_and_disjoint():
    a = random_control_dims(384, [127, 223], 2, seed=0, index=0)
    assert a == random_control_dims(384, [127, 223], 2, seed=0, index=0)
    assert a != random_control_dims(384, [127, 223], 2, seed=0, index=1)
    assert not set(a) & {127, 223} and len(set(a)) == 2
    with pytest.raises(InputError):
        random_control_dims(4, [0, 1, 2], 3, seed=0, index=0)
