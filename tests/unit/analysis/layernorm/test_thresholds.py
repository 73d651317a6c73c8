"""The LayerNorm outlier thresholds: BERT Busters' defaults, validation messages, and a module that
the CLI can read without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend.analysis.layernorm.thresholds import LN_THRESHOLDS, LayerNormThresholds
from backend.engine.errors import InputError


def test_defaults_are_bert_busters_three_sigma_in_half_the_norms():
    assert (LN_THRESHOLDS.k, LN_THRESHOLDS.share) == (3.0, 0.5)
    assert LN_THRESHOLDS == LayerNormThresholds()
    assert LayerNormThresholds(k=0.1, share=1.0).share == 1.0  # the range ends that are allowed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"k": 0}, r"k \(standard deviations\) must be positive, got 0"),
        ({"k": -1.5}, "must be positive, got -1.5"),
        ({"k": float("nan")}, "must be positive, got nan"),
        ({"share": 0}, r"the share of layers must be in \(0, 1\], got 0"),
        ({"share": 1.01}, r"in \(0, 1\], got 1.01"),
    ],
)
def test_bad_values_are_input_errors_that_say_what_is_accepted(options, message):
    with pytest.raises(InputError, match=message):
        LayerNormThresholds(**options)


def test_params_re_exports_the_same_object():
    from backend.analysis.layernorm import params

    assert params.LN_THRESHOLDS is LN_THRESHOLDS


def test_importing_the_thresholds_does_not_import_torch():
    code = (
        "import sys; import backend.analysis.layernorm.thresholds; "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
