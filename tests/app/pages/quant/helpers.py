"""What the AppTests of the Quantization readiness page share: the page opened on a pasted corpus
(a tiny random Llama or BERT), the analysis run by its button, a tab opened, and the verdict."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection

APP = str(Path(__file__).resolve().parents[4] / "app.py")
TIMEOUT = 600
TEXTS = "Summer is warm. Winter is cold.\nThe cat sat on the mat.\nRivers run to the sea."
TINY_BERT = "random:bert:layers=1,width=32,heads=2"


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page(model: str) -> AppTest:
    """The page on ``model``, before its button."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind="paste",
        corpus_text=TEXTS,
        settings=ExtractionSettings(max_length=32, sample_size=2000),
    )
    at.session_state["quant_max_length"] = 16
    at.run()
    at.switch_page("pages/quant.py")
    return rerun(at)


def run_analysis(at: AppTest) -> AppTest:
    at.button(key="quant_run").click()
    return rerun(at)


def ran(model: str) -> AppTest:
    """The page on ``model`` with its analysis run (cached process-wide after the first test)."""
    return run_analysis(page(model))


def open_tab(at: AppTest, tab: str) -> AppTest:
    at.session_state["quant_tab"] = tab
    return rerun(at)


def verdict(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Verdict.**"))


def subheaders(at: AppTest) -> list[str]:
    return [s.value for s in at.subheader]


def chart_specs(at: AppTest) -> list[str]:
    return [c.proto.spec for c in at.get("plotly_chart")]
