"""The report's optional "Quantization readiness" section: opt-in, built from the analysis on the
report's own model and corpus (tiny random Llama) or from a finished one handed in (the app's
page), with the encoder's STS change when the report has pairs (random BERT)."""

from __future__ import annotations

import pytest

from isoscope.analysis.quant import readiness
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.corpus import corpus_from_text
from isoscope.engine.load.models import load_model
from isoscope.share.report import SECTIONS, ReportSettings, build_report

TEXTS = "\n".join(
    [
        "Summer is warm. Winter is cold.",
        "The cat sat on the mat and looked at the dog.",
        "Rivers run to the sea, and the sea does not fill.",
        "A fourth text, with commas, numbers 1 2 3, and a question?",
    ]
)
PAIRS = (
    ["A man plays a guitar.", "A woman slices onions.", "The cat sleeps.", "Kids play soccer."],
    ["A man is playing the guitar.", "A woman cuts an onion.", "A dog runs.", "Children play."],
    [4.8, 4.2, 0.6, 4.0],
)


def _loaded_and_result(source: str):
    loaded = load_model(source, device="cpu")
    settings = ExtractionSettings(max_length=24, sample_size=200, exclude_first=True)
    return loaded, extract(loaded, corpus_from_text(TEXTS), settings)


def test_the_section_is_opt_in_and_written_from_the_analysis(tiny_llama_dir):
    assert "quant" not in SECTIONS
    loaded, result = _loaded_and_result(str(tiny_llama_dir))
    rep = build_report(loaded, result, settings=ReportSettings(quant_texts=3), sections=("quant",))
    sec = rep.section("quant")
    assert sec.skipped is None, sec.skipped
    assert sec.title == "Quantization readiness"
    assert sec.findings[0].startswith("Per-token W8A8 costs")  # the analysis's own verdict
    assert sec.findings[1].startswith("Hardest sites for W8A8 per token: layers.")
    assert len(sec.figures) == 2  # schemes and sensitivity
    caption, rows = sec.tables[0]
    assert [r["scheme"] for r in rows][:2] == ["W8A8 per tensor (static)", "W8A8 per token"]
    assert "Measured on 3 texts" in " ".join(sec.notes)
    page = rep.to_html()
    assert '<section id="quant">' in page and "LLM.int8()" in page


def test_a_finished_analysis_is_used_as_it_is(tiny_llama_dir, monkeypatch):
    loaded, result = _loaded_and_result(str(tiny_llama_dir))
    done = readiness.analyse(loaded, result.texts[:2], max_length=16, keep=3, sensitivity=False)

    def must_not_run(*args, **kwargs):
        raise AssertionError("the section recomputed a finished analysis")

    monkeypatch.setattr(readiness, "analyse", must_not_run)
    rep = build_report(loaded, result, sections=("quant",), quant=done)
    sec = rep.section("quant")
    assert sec.skipped is None, sec.skipped
    assert sec.findings[0] == done.verdict()
    assert len(sec.figures) == 1  # no sensitivity measured
    assert "keep-K = 3" in " ".join(sec.notes)


@pytest.mark.parametrize("source", ["random:bert:layers=1,width=32,heads=2"])
def test_an_encoder_with_pairs_reports_the_sts_change(source):
    loaded, result = _loaded_and_result(source)
    rep = build_report(
        loaded,
        result,
        settings=ReportSettings(quant_texts=4),
        sections=("quant",),
        pairs=PAIRS,
    )
    sec = rep.section("quant")
    assert sec.skipped is None, sec.skipped
    assert "STS Spearman × 100 on 4 pairs" in sec.findings[0]
    assert "STS change" in sec.tables[0][1][0]
