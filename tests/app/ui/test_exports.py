"""AppTest of the sharing glue: the Overview opens with the report's quick findings (the full set
on request) and a 'Download report' button; the projections page offers both exports."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import shown

APP = str(Path(__file__).resolve().parents[3] / "app.py")


@pytest.fixture(autouse=True)
def _no_umap_warmup(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")


def _labels(at: AppTest) -> list[str]:
    return [b.proto.label for b in at.get("download_button")]


def test_overview_shows_the_report_findings_and_the_download():
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(shown(m.value) for m in at.markdown)
    assert "Dimension 223 holds the minimum of" in text
    assert "LayerNorm outlier dims" not in text  # the slow sections wait for the button
    assert "Download report" in _labels(at)
    at.button(key="overview_full_findings").click().run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(shown(m.value) for m in at.markdown)
    assert "LayerNorm outlier dims: 127, 223" in text  # the full report's findings
    assert "A bias-free linear probe recovers absolute position" in text
    assert any("left out, the model is an encoder" in c.value for c in at.caption)


def test_projections_offers_both_exports():
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page("pages/projections.py").run()
    assert not at.exception, [e.value for e in at.exception]
    labels = _labels(at)
    assert "Embedding Projector" in labels and "embedding-atlas" in labels
    assert any("points shown" in c.value for c in at.caption)
