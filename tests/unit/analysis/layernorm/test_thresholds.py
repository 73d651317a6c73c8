"""The LayerNorm outlier thresholds: BERT Busters' defaults, validation messages, and a module that
the CLI can read without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from isoscope.analysis.layernorm.thresholds import (
    LN_K,
    LN_SHARE,
    LN_THRESHOLDS,
    LayerNormThresholds,
)
from isoscope.engine.errors import InputError


def test_defaults_are_bert_busters_three_sigma_in_half_the_norms():
    assert (LN_THRESHOLDS.k, LN_THRESHOLDS.share) == (3.0, 0.5)
    assert LN_THRESHOLDS == LayerNormThresholds()
    lo = LayerNormThresholds(k=LN_K.low, share=LN_SHARE.low)  # the range ends are allowed
    hi = LayerNormThresholds(k=LN_K.high, share=LN_SHARE.high)
    assert (lo.k, hi.share) == (LN_K.low, LN_SHARE.high)
    assert "Kovaleva" in LN_K.citation and "Kovaleva" in LN_SHARE.citation


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"k": 0}, r"^k \(standard deviations\) must be between 1 and 10, got 0$"),
        ({"k": -1.5}, "between 1 and 10, got -1.5"),
        ({"k": float("nan")}, "between 1 and 10, got nan"),
        ({"share": 0}, r"^the share of LayerNorms must be between 0.05 and 1, got 0$"),
        ({"share": 1.01}, "between 0.05 and 1, got 1.01"),
    ],
)
def test_bad_values_are_input_errors_that_say_what_is_accepted(options, message):
    with pytest.raises(InputError, match=message):
        LayerNormThresholds(**options)


def test_params_re_exports_the_same_object():
    from isoscope.analysis.layernorm import params

    assert params.LN_THRESHOLDS is LN_THRESHOLDS


def test_importing_the_thresholds_does_not_import_torch():
    code = (
        "import sys; import isoscope.analysis.layernorm.thresholds; "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
