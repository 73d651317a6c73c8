"""The report's data model: the settings' defaults and validation messages, and a report's sections,
findings and JSON."""

from __future__ import annotations

import pytest

from isoscope.engine.errors import InputError
from isoscope.share.report.model import SECTIONS, Report, ReportSettings, Section


def test_settings_defaults_are_valid_and_bad_values_say_the_range():
    s = ReportSettings()
    assert s.pairs >= 1 and 2 <= s.ablation_texts <= 50_000 and 0 <= s.random_controls <= 100
    for options, message in [
        ({"pairs": 0}, "anisotropy pairs must be at least 1, got 0"),
        ({"ablation_texts": 1}, "ablation texts must be between 2 and 50,000, got 1"),
        ({"random_controls": 101}, "random controls must be between 0 and 100, got 101"),
        (
            {"probe_max_position": 9000},
            "probe max position must be between 2 and 8192 positions, got 9000",
        ),
    ]:
        with pytest.raises(InputError, match=message):
            ReportSettings(**options)
    ReportSettings(pairs=1, ablation_texts=2, random_controls=0, probe_max_position=2)


def _report() -> Report:
    return Report(
        model={"source": "synthetic"},
        corpus={"name": "planted"},
        settings={"pairs": 10},
        version="0.0",
        sections=[
            Section("outliers", "Outlier dimensions", findings=["dim 7", "dim 9"], source="ref"),
            Section("layernorm", "LayerNorm", findings=["ignored"], skipped="no norms"),
            Section("anisotropy", "Anisotropy", findings=["high"]),
        ],
    )


def test_sections_and_findings_skip_left_out_sections():
    rep = _report()
    assert rep.section("layernorm").skipped == "no norms" and rep.section("nonsense") is None
    assert rep.findings() == [
        ("Outlier dimensions", "dim 7"),
        ("Outlier dimensions", "dim 9"),
        ("Anisotropy", "high"),
    ]


def test_to_json_lists_every_section_with_why_it_was_skipped():
    data = _report().to_json()
    assert (data["version"], data["model"], data["settings"]) == (
        "0.0",
        {"source": "synthetic"},
        {"pairs": 10},
    )
    assert [s["key"] for s in data["sections"]] == ["outliers", "layernorm", "anisotropy"]
    assert data["sections"][1]["skipped"] == "no norms" and data["sections"][0]["source"] == "ref"
    assert set(data["sections"][0]) == {"key", "title", "findings", "skipped", "notes", "source"}
    assert {"outliers", "anisotropy", "layernorm"} <= set(SECTIONS)
