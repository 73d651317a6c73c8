"""Norm tests read from a module itself (isoscope.engine.arch.norms)."""

from __future__ import annotations

import torch

from isoscope.engine.arch.norms import (
    is_norm,
    is_projection,
    norm_kind,
    normalises_last_axis,
    rows_within,
    same_storage,
)


class GemmaStyleNorm(torch.nn.Module):
    """An RMSNorm scaling by (1 + weight), as Gemma's."""

    def __init__(self, width):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1 + self.weight)


def test_norm_kind_and_gamma_offset_come_from_the_module():
    assert norm_kind(torch.nn.LayerNorm(8), 8) == ("layernorm", 0.0)
    assert norm_kind(torch.nn.RMSNorm(8), 8) == ("rmsnorm", 0.0)
    assert norm_kind(GemmaStyleNorm(8), 8) == ("rmsnorm", 1.0)
    layer = torch.nn.LayerNorm(8)
    with torch.no_grad():
        layer.weight.fill_(2.0)
    norm_kind(layer, 8)
    assert torch.all(layer.weight == 2.0)  # the probe restores the weights


def test_norms_projections_and_channel_first_norms():
    assert is_norm(torch.nn.LayerNorm(4)) and is_norm(GemmaStyleNorm(4))
    assert not is_norm(torch.nn.Linear(4, 4)) and is_projection(torch.nn.Linear(4, 4))
    assert not is_projection(torch.nn.Embedding(4, 4)) and not is_projection(torch.nn.LayerNorm(4))
    group = torch.nn.GroupNorm(2, 6)
    assert not normalises_last_axis(group, torch.zeros(1, 6, 10))
    assert normalises_last_axis(torch.nn.LayerNorm(10), torch.zeros(1, 6, 10))


def test_shared_storage_and_rows_within():
    x = torch.randn(2, 5, 4)
    assert same_storage(x, x[:, 1:]) and not same_storage(x, x.clone())
    assert rows_within(x[0, [1, 3]], x) and not rows_within(torch.randn(2, 4) + 10, x)
