"""The traced pass sees every projection the forward calls on the tokens, wherever it sits: in the
blocks, in lists kept beside them (a layer as attentions[i] + ffns[i]), outside the layers (a
model-level projection), and tells a router that returns a tuple and a routed expert (fewer rows
than its layer) from a plain projection (backend/engine/arch/tracing.py). Synthetic modules: the
shapes are planted, so each member of the class is checked against what it must be."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from isoscope.engine.arch.tracing import projection_inputs, projections_outside

W, V, T = 16, 40, 8


class TupleRouter(nn.Linear):
    """An nn.Linear subclass whose forward returns (top-k weights, chosen experts)."""

    def forward(self, x):
        return torch.topk(super().forward(x).softmax(-1), 2, dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(W, W) for _ in range(4))

    def forward(self, x):
        w = (self.q(x) @ self.k(x).transpose(-1, -2)).softmax(-1)
        return self.o(w @ self.v(x))


class FFN(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(W, 2 * W), nn.Linear(2 * W, W)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Routed(nn.Module):
    """A router that returns a tuple and four experts, each run on its routed rows only."""

    def __init__(self):
        super().__init__()
        self.router = TupleRouter(W, 4)
        self.experts = nn.ModuleList(FFN() for _ in range(4))

    def forward(self, x):
        weights, chosen = self.router(x)
        flat, out = x.reshape(-1, W), torch.zeros_like(x).reshape(-1, W)
        for e, expert in enumerate(self.experts):
            rows = (chosen.reshape(-1, 2) == e).any(-1)
            if rows.any():
                out[rows] += expert(flat[rows])
        return out.reshape(x.shape)


class Stacked(nn.Module):
    """Three feed-forward blocks run one after another on every token (MobileBERT's ffn list)."""

    def __init__(self):
        super().__init__()
        self.ffn = nn.ModuleList(FFN() for _ in range(3))

    def forward(self, x):
        for f in self.ffn:
            x = x + f(x)
        return x


class Block(nn.Module):
    def __init__(self, mlp: nn.Module):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(W), nn.LayerNorm(W)
        self.attn, self.mlp = Attention(), mlp

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Blocks(nn.Module):
    """Two layers in one list of blocks, a projection before them (outside the layers)."""

    def __init__(self, mlp):
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=2, vocab_size=V, hidden_size=W)
        self.embed = nn.Embedding(V, W)
        self.project_in = nn.Linear(W, W)
        self.layers = nn.ModuleList(Block(mlp()) for _ in range(2))

    def forward(self, input_ids, attention_mask=None):
        x = self.project_in(self.embed(input_ids))
        for layer in self.layers:
            x = layer(x)
        return x


class ParallelLists(nn.Module):
    """XLM's layout: layer i is attentions[i], norms1[i], ffns[i], norms2[i] (post-norm)."""

    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=2, vocab_size=V, hidden_size=W)
        self.embed = nn.Embedding(V, W)
        self.attentions = nn.ModuleList(Attention() for _ in range(2))
        self.norms1 = nn.ModuleList(nn.LayerNorm(W) for _ in range(2))
        self.ffns = nn.ModuleList(FFN() for _ in range(2))
        self.norms2 = nn.ModuleList(nn.LayerNorm(W) for _ in range(2))

    def forward(self, input_ids, attention_mask=None):
        x = self.embed(input_ids)
        for i in range(2):
            x = self.norms1[i](x + self.attentions[i](x))
            x = self.norms2[i](x + self.ffns[i](x))
        return x


def _inputs(model):
    torch.manual_seed(0)
    return {c.path: c for c in projection_inputs(model.eval())}


def test_parts_in_parallel_lists_belong_to_their_layer():
    calls = _inputs(ParallelLists())
    for i in range(2):
        for path in (f"attentions.{i}.q", f"ffns.{i}.up", f"ffns.{i}.down"):
            assert calls[path].layer == i
        assert calls[f"ffns.{i}.up"].norm == f"norms1.{i}"


def test_a_projection_outside_the_layers_is_listed():
    torch.manual_seed(0)
    model = Blocks(FFN).eval()
    assert projections_outside(model) == ("project_in",)
    assert "project_in" not in _inputs(model)


@pytest.mark.parametrize(("mlp", "routed"), [(Routed, True), (Stacked, False), (FFN, False)])
def test_routed_rows_and_tuple_routers_are_told_apart(mlp, routed):
    calls = _inputs(Blocks(mlp))
    full = calls["layers.0.attn.q"].rows
    assert full == T
    members = [c for p, c in calls.items() if ".experts." in p or ".ffn." in p]
    assert bool(members) == (mlp is not FFN)
    assert any(c.rows < full for c in members) == routed
    router = calls.get("layers.0.mlp.router")
    assert (router is not None and not router.plain) == (mlp is Routed)
    assert all(c.plain for p, c in calls.items() if "router" not in p)


class FourDNorm(nn.Module):
    """An RMSNorm that takes only (B, streams, T, W) input."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(W))

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError("expects (batch, streams, tokens, width)")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class FourDBlock(Block):
    def __init__(self, mlp):
        super().__init__(mlp)
        self.norm1 = FourDNorm()

    def forward(self, x):
        x = x + self.attn(self.norm1(x[None])[0])
        return x + self.mlp(self.norm2(x))


def test_a_norm_that_takes_only_four_dimensional_input_is_read():
    from isoscope.engine.arch import wiring

    torch.manual_seed(0)
    model = Blocks(FFN)
    model.layers = nn.ModuleList(FourDBlock(FFN()) for _ in range(2))
    norms = {n.path: n for n in wiring(model.eval()).norms}
    assert norms["layers.0.norm1"].kind == "rmsnorm" and norms["layers.0.norm1"].role == "pre_attn"
    assert norms["layers.0.norm2"].kind == "layernorm"
