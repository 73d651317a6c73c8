"""forward_hooks: every hook is removed on exit, also when the body (or the code before the forward
pass, like tokenization in the queries/keys view) raises. Hooks left on the shared, cached model
would corrupt every later analysis in the process."""

from __future__ import annotations

import pytest
import torch

import isoscope.analysis.positional.qk as qk
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.load.models import load_model


@pytest.fixture(scope="module")
def tiny():
    return load_model("random:bert:layers=2,width=32,heads=2,seed=0", device="cpu")


def _hooks(model: torch.nn.Module) -> set[tuple[str, int]]:
    """Every forward (pre-)hook on the model, as (module path, hook id)."""
    return {
        (name, key)
        for name, m in model.named_modules()
        for key in (*m._forward_hooks, *m._forward_pre_hooks)
    }


@pytest.fixture()
def baseline(tiny) -> set[tuple[str, int]]:
    """The hooks transformers itself installs (lazily, for output capture) after one forward pass."""
    ids = torch.tensor([[2, 5, 7, 3]])
    tiny.encoder(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    return _hooks(tiny.model)


def test_hooks_run_inside_and_are_removed_after(tiny, baseline):
    seen = []
    query = tiny.encoder.encoder.layer[0].attention.self.query
    with forward_hooks({query: lambda _m, _i, out: seen.append(tuple(out.shape))}):
        assert len(query._forward_hooks) == 1
        ids = torch.tensor([[2, 5, 7, 3]])
        tiny.encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert seen == [(1, 4, 32)]
    assert len(query._forward_hooks) == 0 and _hooks(tiny.model) == baseline


def test_exception_inside_leaves_no_hook(tiny, baseline):
    layers = list(tiny.encoder.encoder.layer)
    with pytest.raises(RuntimeError, match="boom"):
        with forward_hooks({m: [lambda *_: None, lambda *_: None] for m in layers}):
            assert len(_hooks(tiny.model) - baseline) == 4
            raise RuntimeError("boom")
    assert _hooks(tiny.model) == baseline


def test_pre_hooks_are_removed_too(tiny, baseline):
    with pytest.raises(ValueError):
        with forward_hooks({tiny.encoder.embeddings: lambda *_: None}, pre=True):
            assert len(tiny.encoder.embeddings._forward_pre_hooks) == 1
            raise ValueError
    assert len(tiny.encoder.embeddings._forward_pre_hooks) == 0 and _hooks(tiny.model) == baseline


def test_tokenizer_failure_in_qk_leaves_no_hook(tiny, baseline, monkeypatch):
    """The old bug: qk_stats attached hooks, then tokenized outside its try/finally."""

    def broken_tokenize(*args, **kwargs):
        raise RuntimeError("tokenizer exploded")

    monkeypatch.setattr(qk, "tokenize", broken_tokenize)
    with pytest.raises(RuntimeError, match="tokenizer exploded"):
        qk.qk_stats(tiny, ["a short text", "another one"])
    for layer in tiny.encoder.encoder.layer:
        assert not layer.attention.self.query._forward_hooks
        assert not layer.attention.self.key._forward_hooks
    assert _hooks(tiny.model) == baseline


def test_qk_stats_leaves_no_hook_after_success(tiny, baseline):
    stats = qk.qk_stats(tiny, ["a short text", "another one"], max_length=16)
    assert stats.num_tokens > 0 and stats.cos_qk.shape == (2, 2)
    assert _hooks(tiny.model) == baseline
