"""Before/after SmoothQuant and the rotation on a tiny random Llama, through the planted limits of
the smoothing formula: at α = 0 every weight column ends at the same max (s_j = 1 / max|W_j|), at
α = 1 every activation channel ends at or below 1 (s_j = max|X_j|, the corpus max)."""

from __future__ import annotations

import math

import pytest

from backend.analysis.quant.before_after import before_after
from backend.analysis.quant.readiness import scan_sites
from backend.engine.models import load_model
from tests.quant_checks import TEXTS, no_hooks


@pytest.fixture(scope="module")
def scanned(tiny_tied_llama_dir):
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    return loaded, scan_sites(loaded, TEXTS, max_length=24, error_tokens=24, end_tokens=24)


def test_alpha_zero_evens_the_weight_columns_and_one_the_activations(scanned):
    loaded, scan = scanned
    at_zero = before_after(loaded, scan, alpha=0.0)
    at_one = before_after(loaded, scan, alpha=1.0)
    assert no_hooks(loaded.model)
    for zero, one in zip(at_zero, at_one, strict=True):
        assert zero["smoothquant"].weight_column_max_over_median == pytest.approx(1.0, rel=1e-5)
        assert one["smoothquant"].act_share_ge_6 == 0.0  # every |x'| <= 1
        assert zero["before"] == one["before"]  # the untransformed side does not depend on α
        assert math.isfinite(zero["rotation"].act_kurtosis)
        assert zero["rotation"].act_int8_error >= 0 and zero["rotation"].weight_int8_error >= 0
