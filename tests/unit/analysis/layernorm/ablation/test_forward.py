"""The ablation's forward helpers: padding of label rows."""

from __future__ import annotations

import numpy as np


def test_labels_pad_with_minus_100_and_a_zero_mask():
    from isoscope.analysis.layernorm.ablation.forward import padded

    labels, mask = padded([np.array([5, -100, 7]), np.array([9])], -100)
    assert labels.tolist() == [[5, -100, 7], [9, -100, -100]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_cosines_along_the_last_axis_and_zero_vectors_give_zero():
    import torch

    from isoscope.analysis.layernorm.ablation.forward import cosines

    a = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[0.0, 2.0], [2.0, 2.0], [1.0, 0.0]], dtype=torch.float64)
    got = cosines(a, b)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, [0.0, 1.0, 0.0], atol=1e-12)
