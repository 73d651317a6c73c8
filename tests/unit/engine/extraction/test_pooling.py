"""Mean pooling over non-padding tokens, as sentence-transformers' Pooling (mean_tokens)."""

from __future__ import annotations

import torch

from isoscope.engine.extraction.pooling import masked_mean


def test_mean_over_unmasked_tokens_only():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])  # (B=1, T=3, d=2)
    mask = torch.tensor([[1, 1, 0]])
    assert torch.equal(masked_mean(hidden, mask), torch.tensor([[2.0, 3.0]]))


def test_leading_state_axis_broadcasts():
    hidden = torch.arange(2 * 2 * 3 * 4, dtype=torch.float64).reshape(2, 2, 3, 4)  # (S, B, T, d)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    pooled = masked_mean(hidden, mask)
    assert pooled.shape == (2, 2, 4)
    assert torch.allclose(pooled[1, 1], hidden[1, 1, 0])
    assert torch.allclose(pooled[0, 0], hidden[0, 0].mean(0))


def test_all_padding_row_gives_zeros_not_nan():
    pooled = masked_mean(torch.ones(1, 2, 3), torch.zeros(1, 2))
    assert torch.equal(pooled, torch.zeros(1, 3))
