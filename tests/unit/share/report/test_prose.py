"""The report's prose on planted results: findings quote the planted outlier and what zeroing it
does, no outlier is a finding, and state lists shorten runs of layers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from isoscope.analysis.anisotropy import clipped_anisotropy_by_state
from isoscope.share.report import ReportSettings, build_report
from tests.report_inputs import QUICK
from tests.report_inputs import report_result as _result


def test_findings_quote_the_planted_outlier_and_what_zeroing_it_does(planted):
    rep = build_report(None, planted, sections=QUICK, settings=ReportSettings(pairs=2000))
    outliers = rep.section("outliers")
    assert outliers.skipped is None
    first = outliers.findings[0]
    share = planted.argmin_freq[2, 7]
    assert share > 0.9
    assert first.startswith(
        f"Dimension 7 holds the minimum of {100 * share:.0f} % of tokens at state 2"
    )
    raw = rep.section("anisotropy")
    aniso = re.search(r"cuts anisotropy from (-?\d+\.\d+) to (-?\d+\.\d+)", first)
    clipped = clipped_anisotropy_by_state(planted, [[7]] * 3, n_pairs=2000)
    assert float(aniso.group(2)) == pytest.approx(clipped[2], abs=0.006)
    assert (
        float(aniso.group(1)) > 0.3 > float(aniso.group(2))
    )  # the shift makes state 2 anisotropic
    assert any("is highest at the final state 2" in f for f in raw.findings)
    assert any("dimension 7 carries" in f for f in raw.findings)
    assert len(raw.figures) == 2  # anisotropy line + PCA before/after clipping


def test_no_outlier_is_a_finding_not_an_error():
    rng = np.random.default_rng(1)
    result = _result(rng.normal(size=(2, 300, 16)), np.repeat(np.arange(30), 10))
    rep = build_report(None, result, sections=QUICK, settings=ReportSettings(pairs=500))
    assert rep.section("outliers").findings[0].startswith("No dimension is an outlier")
    assert any("changes nothing" in f for f in rep.section("anisotropy").findings)


def test_state_lists_shorten_runs_of_layers():
    from isoscope.share.report.prose import _states

    assert _states(["emb", "1", "2", "3", "5", "7", "8", "9", "10"]) == "emb, 1–3, 5, 7–10"
    assert _states(["1", "2"]) == "1, 2"
