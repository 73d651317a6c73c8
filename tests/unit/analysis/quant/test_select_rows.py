"""One row per non-padding token from a projection input of any layout the forward gives it:
(B, T, c), flattened (B*T, c), and with extra axes of size one around the tokens (a latent
attention's up-projection fed (B, 1, T, rank)); the activation scan's twin reads the same."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.massive.inner import per_token
from isoscope.analysis.quant.readiness.scan import select_rows

B, T, C = 3, 5, 4
MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
X = torch.arange(B * T * C, dtype=torch.float32).reshape(B, T, C)
EXPECTED = X[MASK]

LAYOUTS = {
    "(B, T, c)": X,
    "(B*T, c)": X.reshape(B * T, C),
    "(B, 1, T, c)": X[:, None],
    "(B, T, 1, c)": X[:, :, None],
    "(1, B, 1, T, c)": X[None, :, None],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("read", [select_rows, per_token])
def test_every_layout_gives_the_non_padding_rows(layout, read):
    torch.testing.assert_close(read(LAYOUTS[layout], MASK), EXPECTED)


@pytest.mark.parametrize(
    "x",
    [X.transpose(0, 1)[:, :, None], X.reshape(B, T, 2, C // 2).transpose(1, 2)],
    ids=["(T, B, 1, c)", "(B, heads, T, c/heads)"],
)
def test_a_layout_that_is_not_one_row_per_token_is_refused(x):
    assert select_rows(x, MASK) is None
