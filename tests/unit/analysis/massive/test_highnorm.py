"""High-norm tokens of image models (Darcet et al. 2024) on planted token norms, and their figures:
the threshold rule, the share above it, the top patches, norms by kind of token."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.highnorm import IMAGE_CARRIERS, ImageScan, token_kind
from isoscope.analysis.massive.massive import MassiveAccumulator
from isoscope.engine.errors import InputError

NAMES = ("[CLS]", "[REG1]") + tuple(f"patch r{r}c{c}" for r in range(2) for c in range(3))


def planted_scan() -> ImageScan:
    """2 states, 4 images, [CLS] + 1 register + a 2x3 grid; every patch has norm 1 except
    image 2's patch r1c0 (norm 50) at state 1; the register has norm 20 at state 1."""
    norms = np.ones((2, 4, len(NAMES)), dtype=np.float32)
    norms[1, :, 1] = 20.0
    norms[1, 2, 2 + 3] = 50.0  # image 2, patch r1c0
    acc = MassiveAccumulator(2, torch.device("cpu"))
    stats = acc.finish(
        ["emb", "1"],
        lambda ids: [NAMES[i] for i in ids],
        carrier_of=lambda position, token: token_kind(token),
        kinds=IMAGE_CARRIERS,
    )
    return ImageScan(stats, norms, NAMES, (2, 3), prefix=2, seconds=0.0)


def test_token_kinds():
    assert [token_kind(n) for n in ("[CLS]", "[DIST]", "[REG3]", "[PREFIX1]", "patch r0c1")] == [
        "CLS",
        "distillation",
        "register",
        "CLS",
        "patch",
    ]


def test_threshold_share_and_top_patches():
    scan = planted_scan()
    thresholds = scan.thresholds(2.0)
    np.testing.assert_allclose(thresholds, [2.0, 2.0])  # 2 x the median patch norm (1)
    np.testing.assert_allclose(scan.high_norm_share(thresholds), [0.0, 1 / 24])
    assert scan.top_patches(1, 2.0) == [{"image": 2, "row": 1, "column": 0, "norm": 50.0}]
    assert scan.top_patches(0, 2.0) == []
    assert scan.patch_norms(1, 2)[1, 0] == 50.0 and scan.patch_norms(1, 2).shape == (2, 3)
    with pytest.raises(InputError, match="above 1"):
        scan.thresholds(1.0)


def test_norm_by_kind_keeps_only_the_kinds_present():
    by_kind = planted_scan().norm_by_kind()
    assert set(by_kind) == {"CLS", "register", "patch"}
    np.testing.assert_allclose(by_kind["register"], [1.0, 20.0])
