"""AppTest of the guided tour: every step renders on the bundled model with a verdict, a figure
and a thing to try; Next / Previous walk the steps without typing."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")


@pytest.fixture(autouse=True)
def _no_umap_warmup(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")


def open_tour() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page("pages/tour.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _verdicts(at: AppTest) -> list[str]:
    return [e.value for e in at.success] + [e.value for e in at.warning]


def test_the_tour_walks_five_steps_with_verdicts():
    at = open_tour()
    assert [t.value for t in at.title] == ["Guided tour"]
    headers = []
    for number in range(1, 6):
        header = at.header[0].value
        assert header.startswith(f"Step {number} of 5")
        headers.append(header)
        assert len(at.get("plotly_chart")) == 1
        assert any(i.value.startswith("**Try this:**") for i in at.info)
        assert len(at.metric) >= 2
        if number < 5:
            next(b for b in at.button if b.key == "tour_next").click().run()
            assert not at.exception, [e.value for e in at.exception]
    assert len(set(headers)) == 5
    next(b for b in at.button if b.key == "tour_prev").click().run()
    assert at.header[0].value.startswith("Step 4 of 5")


def test_the_bundled_model_agrees_with_the_papers():
    at = open_tour()
    for number in ("1", "2", "3", "4", "5"):
        at.radio(key="tour_step").set_value(number).run()
        assert not at.exception
        (verdict,) = _verdicts(at)
        assert verdict.startswith("**This model agrees.**"), (number, verdict)
    metrics = {m.label: m.value for m in at.metric}
    slope = float(metrics["log-log slope, causal, layer 1"])
    assert -1.3 <= slope <= -0.7
