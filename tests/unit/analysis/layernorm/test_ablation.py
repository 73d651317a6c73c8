"""Ablation primitive: zeroing, bit-exact restore (also on error), masks, controls, batched sweep."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from backend.analysis.layernorm.ablation import (
    ablated,
    mask_tokens,
    masked_norms,
    parse_dims,
    random_control_dims,
    run_ablation,
    sweep,
)
from backend.analysis.layernorm.params import find_norms, select_norms
from backend.engine.errors import InputError
from backend.engine.extraction import TokenizedCorpus
from backend.engine.models import _finish, build_random_model

TEXTS = [
    "the cat sat on the mat .",
    "a dog barked twice",
    "rain again today , sadly",
    "one more short line",
]


def tiny_model():
    return build_random_model("bert", {"layers": 2, "width": 32, "heads": 2, "seed": 0}, 200).eval()


@pytest.fixture(scope="module")
def tiny_loaded():
    from backend.engine.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    model = build_random_model(
        "bert", {"layers": 2, "width": 32, "heads": 2, "seed": 1}, len(tokenizer)
    )
    parts = {
        "model": model,
        "tokenizer": tokenizer,
        "source": "tiny",
        "display": "tiny",
        "fingerprint": "t",
        "weights_dir": None,
        "random": True,
        "spec": {},
    }
    return _finish(parts, torch.device("cpu"), torch.float32)


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


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


def test_mask_tokens_skips_specials_and_is_seeded():
    ids = [np.arange(100, 100 + n) for n in (40, 3, 60)]
    special = [np.r_[True, np.zeros(n - 2, bool), True] for n in (40, 3, 60)]
    tok = TokenizedCorpus(ids, special, [np.zeros(len(i), np.int32) for i in ids], 0, 128)
    masked = mask_tokens(tok, mask_token_id=1, seed=0)
    for m, lab, sp, orig in zip(masked.input_ids, masked.labels, special, ids, strict=True):
        chosen = lab >= 0
        assert not (chosen & sp).any() and chosen.sum() >= 1
        assert (
            (m[chosen] == 1).all()
            and (lab[chosen] == orig[chosen]).all()
            and (m[~chosen] == orig[~chosen]).all()
        )
    share = masked.num_masked / sum((~s).sum() for s in special)
    assert 0.05 < share < 0.3
    again = mask_tokens(tok, mask_token_id=1, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(masked.labels, again.labels, strict=True))


def test_run_ablation_leaves_the_model_untouched(tiny_loaded):
    before = snapshot(tiny_loaded.model)
    report = run_ablation(tiny_loaded, TEXTS, [1, 2], random_controls=2, max_length=16)
    assert same(before, snapshot(tiny_loaded.model))
    assert report.effect.embedding_cosine[0] == pytest.approx(
        1.0
    )  # the embedding LN is not ablated
    assert (report.effect.embedding_cosine[1:] < 1).all()
    assert len(report.controls) == 2 and report.effect.mlm_loss is None


def test_batched_sweep_matches_naive_loop(tiny_loaded):
    before = snapshot(tiny_loaded.model)
    batched = sweep(tiny_loaded, TEXTS, dims=range(10), copies=4, max_length=16)
    naive = sweep(tiny_loaded, TEXTS, dims=range(10), method="naive", max_length=16)
    assert batched.complete and batched.dims.tolist() == list(range(10))
    np.testing.assert_allclose(batched.embedding_cosine, naive.embedding_cosine, atol=1e-6)
    np.testing.assert_allclose(batched.token_cosine, naive.token_cosine, atol=1e-6)
    assert (batched.embedding_cosine[:, -1] < 1).all()
    assert same(before, snapshot(tiny_loaded.model))


def test_sweep_can_be_stopped(tiny_loaded):
    stopped = sweep(
        tiny_loaded,
        TEXTS,
        dims=range(12),
        copies=4,
        max_length=16,
        progress=lambda done, total: False,
    )
    assert not stopped.complete and stopped.dims.tolist() == [0, 1, 2, 3]
    event = threading.Event()
    event.set()
    none = sweep(tiny_loaded, TEXTS, dims=range(12), copies=4, max_length=16, stop=event)
    assert not none.complete and len(none.dims) == 0


def test_ablation_batches_and_pads_with_the_extraction_helpers(tiny_loaded, monkeypatch):
    """One batching/padding rule: run_ablation's batches are plan_batches', padded by pad_rows."""
    import backend.analysis.layernorm.ablation.forward as forward
    import backend.analysis.layernorm.ablation.runs as runs
    from backend.engine.extraction import pad_rows, plan_batches

    planned, padded_widths = [], []

    def spy_plan(lengths, batch_size, token_budget=None):
        batches = plan_batches(lengths, batch_size, token_budget)
        planned.append([b.tolist() for b in batches])
        return batches

    def spy_pad(rows, pad_id):
        padded_widths.append(max(len(r) for r in rows))
        return pad_rows(rows, pad_id)

    monkeypatch.setattr(runs, "plan_batches", spy_plan)
    monkeypatch.setattr(forward, "pad_rows", spy_pad)
    run_ablation(tiny_loaded, TEXTS, [1], random_controls=1, batch_size=3, max_length=16, mlm=False)
    assert planned and all(len(b) <= 3 for batches in planned for b in batches)
    assert padded_widths  # every batch went through the one padding helper


def test_labels_pad_with_minus_100_and_a_zero_mask():
    from backend.analysis.layernorm.ablation.forward import padded

    labels, mask = padded([np.array([5, -100, 7]), np.array([9])], -100)
    assert labels.tolist() == [[5, -100, 7], [9, -100, -100]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]
