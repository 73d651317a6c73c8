"""The report's "headline dimensions, explained" section on a tiny random Llama whose layer-1 MLP
writes a planted constant at dim 5 (an outlier at every later state): a compact card per headline
dim (top tokens, largest writers with the sum check, the strongest readers) in the report's own
self-contained HTML; the number of cards is capped; a card that fails is one note line and the
report is still built and rendered."""

from __future__ import annotations

import re

import pytest
import torch

from isoscope.share.report import ReportSettings, build_report
from tests import zoo
from tests.dimension_models import D
from tests.dimension_models import load_tiny as _load

TEXTS = [
    "the cat sat on the dog .",
    "a dog sat , the cat w1 w2 w3 !",
    "w5 w6 the cat ; w7 w8 w9 w10",
    "the dog",
    "w11 w12 w13 the cat on a dog ; w20",
    "the w4 . a dog sat",
]
SECTIONS = ("outliers", "dimension")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text

    loaded = _load(tmp_path_factory.mktemp("planted"), zoo, "llama", mlp_bias=True)
    with torch.no_grad():
        loaded.model.layers[0].mlp.down_proj.weight[D].zero_()
        loaded.model.layers[0].mlp.down_proj.bias[D] = 40.0
    result = extract(loaded, corpus_from_text("\n".join(TEXTS)), ExtractionSettings(max_length=32))
    return loaded, result


def test_the_headline_dimension_gets_a_card(planted):
    loaded, result = planted
    rep = build_report(loaded, result, sections=SECTIONS)
    assert rep.section("outliers").findings[0].startswith(f"Dimension {D} ")
    sec = rep.section("dimension")
    assert sec.skipped is None, sec.skipped
    assert sec.findings[0].startswith(f"Dimension {D} at state ")
    assert "its largest writer is the mlp of layer 1 (mean +40.000)" in sec.findings[0]
    captions = [caption for caption, _ in sec.tables]
    assert captions[0].startswith(f"Dimension {D} at state ") and "top tokens" in captions[0]
    tokens = sec.tables[0][1]
    assert {r["end"] for r in tokens} == {"high", "low"} and all(
        "[[" in r["context"] for r in tokens
    )
    writers_caption, writers = sec.tables[1]
    assert (writers[0]["layer"], writers[0]["component"]) == ("layer 1", "mlp")
    assert float(writers[0]["mean contribution"]) == pytest.approx(40.0, abs=1e-3)
    check = re.search(r"sum to the value within (\S+), largest \|value\| (\S+)\)", writers_caption)
    assert float(check.group(1)) <= 1e-5 * max(1.0, float(check.group(2)))
    assert any("read it most strongly" in c for c in captions)
    assert any("at most 3 headline dims" in n for n in sec.notes)
    page = rep.to_html()
    body = page[page.index('<section id="dimension">') :]
    body = body[: body.index("</section>")]
    assert "The headline dimensions, explained" in body and "largest writers" in body
    assert not re.search(r"<script[^>]*\bsrc=|https?://(localhost|127\.0\.0\.1)", page)


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_the_cards_are_capped(planted, cap):
    loaded, result = planted
    rep = build_report(
        loaded, result, settings=ReportSettings(dimension_cards=cap), sections=SECTIONS
    )
    sec = rep.section("dimension")
    assert sec.skipped is None
    assert 1 <= len(sec.findings) <= cap
    assert sec.findings[0].startswith(f"Dimension {D} at state ")


def test_no_cards_asked_for_is_one_line(planted):
    loaded, result = planted
    rep = build_report(
        loaded, result, settings=ReportSettings(dimension_cards=0), sections=SECTIONS
    )
    assert rep.section("dimension").skipped.startswith("no dimension cards were asked for")


@pytest.mark.parametrize("bad", [-1, 4])
def test_the_cap_is_checked(bad):
    from isoscope.engine.errors import InputError

    with pytest.raises(InputError, match="dimension cards must be between 0 and 3"):
        ReportSettings(dimension_cards=bad)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (RuntimeError("a bug"), "the card could not be built (RuntimeError: a bug at "),
        (ValueError("shapes"), "the card could not be built (ValueError: shapes at "),
        ("refusal", "no card (the model has no list of per-layer blocks"),
    ],
)
def test_a_card_that_fails_is_one_line(planted, monkeypatch, error, line):
    from isoscope.analysis import dimension
    from isoscope.engine.errors import UnsupportedModelError

    if error == "refusal":
        error = UnsupportedModelError("the model has no list of per-layer blocks to decompose")

    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr(dimension, "dimension_card", failing)
    loaded, result = planted
    rep = build_report(loaded, result, sections=SECTIONS)
    sec = rep.section("dimension")
    assert sec.skipped is None and not sec.findings and not sec.tables
    failures = [n for n in sec.notes if n.startswith(f"Dimension {D}: ")]
    assert failures and line in failures[0] and "\n" not in failures[0]
    assert rep.section("outliers").skipped is None
    assert line.split(" (")[0] in rep.to_html()
