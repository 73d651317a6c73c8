"""build_report: a failing section is left out with one line, sections that do not apply say why,
and an unknown section is an input error."""

from __future__ import annotations

import pytest

from isoscope.share.report import ReportSettings, build_report, render_html
from isoscope.share.report import build as report_module
from tests.report_inputs import QUICK


def test_a_failing_section_is_left_out_with_one_line(planted, monkeypatch):
    def broken(ctx):
        raise RuntimeError("boom")

    monkeypatch.setitem(report_module.BUILDERS, "anisotropy", broken)
    rep = build_report(None, planted, sections=QUICK, settings=ReportSettings(pairs=500))
    assert rep.section("outliers").skipped is None and rep.section("outliers").findings
    skipped = rep.section("anisotropy").skipped
    assert skipped.startswith("could not be computed (RuntimeError: boom")
    page = render_html(rep)
    assert "Left out: could not be computed (RuntimeError: boom" in page


def test_sections_that_do_not_apply_say_why(planted):
    class _Info:
        is_causal = False

    class _Loaded:
        info = _Info()

    rep = build_report(_Loaded(), planted, sections=("similarity", "massive"))
    assert "no sentence pairs given" in rep.section("similarity").skipped
    assert "encoder" in rep.section("massive").skipped
    assert rep.findings() == []
    assert "No findings could be computed." in render_html(rep)


def test_unknown_section_is_an_input_error(planted):
    from isoscope.engine.errors import InputError

    with pytest.raises(InputError, match="unknown report section"):
        build_report(None, planted, sections=("outliers", "nonsense"))


def test_criteria_the_caller_has_are_not_computed_again(planted, monkeypatch):
    from isoscope.analysis import outliers

    known = outliers.criteria_by_state(planted)
    baseline = build_report(None, planted, sections=QUICK, settings=ReportSettings(pairs=500))

    def refused(*args, **kwargs):
        raise AssertionError("the criteria were computed again")

    monkeypatch.setattr(outliers, "criteria_by_state", refused)
    given = build_report(
        None, planted, sections=QUICK, settings=ReportSettings(pairs=500), criteria=known
    )
    assert given.section("outliers").skipped is None
    assert given.findings() == baseline.findings()
