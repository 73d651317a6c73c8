"""backend.share.report on a synthetic extraction with a planted outlier dimension: the findings quote
the measured numbers, the HTML is self-contained (plotly.js once), and a failing section is left
out with one line while the others stay."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

from backend.analysis.geometry.isotropy import clipped_anisotropy_by_state
from backend.engine.extraction import ExtractionResult, TokenTable
from backend.share.report import ReportSettings, build_report, render_html
from backend.share.report import build as report_module
from tests.synthetic import result_from_vectors


def _result(vectors: np.ndarray, text_id: np.ndarray) -> ExtractionResult:
    """An ExtractionResult of token vectors (S, n, d), every token in the sample."""
    n = vectors.shape[1]
    tokens = TokenTable(
        text_id=text_id.astype(np.int32),
        position=np.tile(np.arange(10, dtype=np.int32), n // 10),
        token=np.array([f"t{i % 37}" for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.zeros(n, dtype=bool),
        is_punct=np.zeros(n, dtype=bool),
    )
    return result_from_vectors(
        vectors,
        tokens,
        model={"source": "synthetic", "display_name": "synthetic", "architecture": "Synth"},
    )


@pytest.fixture(scope="module")
def planted() -> ExtractionResult:
    """3 hidden states of isotropic noise; dim 7 shifted to -6 at state 2 (holds every token's min)."""
    rng = np.random.default_rng(0)
    n, d = 600, 32
    vectors = rng.normal(size=(3, n, d))
    vectors[2, :, 7] -= 6.0
    return _result(vectors, np.repeat(np.arange(60), 10))


QUICK = ("outliers", "anisotropy")


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

    rep = build_report(_Loaded(), planted, sections=("similarity", "decoder"))
    assert "no sentence pairs given" in rep.section("similarity").skipped
    assert "encoder" in rep.section("decoder").skipped
    assert rep.findings() == []
    assert "No findings could be computed." in render_html(rep)


def test_html_is_self_contained_deterministic_and_has_plotly_once(planted):
    rep = build_report(None, planted, sections=QUICK, settings=ReportSettings(pairs=500))
    page = rep.to_html()
    assert (
        page
        == build_report(None, planted, sections=QUICK, settings=ReportSettings(pairs=500)).to_html()
    )
    assert page.count('<script type="text/javascript">/**') == 1  # plotly.js inlined once
    assert page.count("plotly.js v") >= 1
    body = page.split("</head>", 1)[1]  # everything after the inlined plotly.js
    assert "cdn.plot.ly" not in body and not re.search(r"<script[^>]*\bsrc=", page)
    assert 'id="fig-outliers-0"' in page and 'id="fig-anisotropy-0"' in page
    for heading in ("Findings", "Model card", "Corpus", "Settings"):
        assert f"<h2>{heading}</h2>" in page
    assert "isoscope 0." in page
    # every finding of the sections opens the page
    for _, text in rep.findings():
        assert html.escape(text) in page


def test_unknown_section_is_an_input_error(planted):
    from backend.engine.errors import InputError

    with pytest.raises(InputError, match="unknown report section"):
        build_report(None, planted, sections=("outliers", "nonsense"))


def test_state_lists_shorten_runs_of_layers():
    from backend.share.report.prose import _states

    assert _states(["emb", "1", "2", "3", "5", "7", "8", "9", "10"]) == "emb, 1–3, 5, 7–10"
    assert _states(["1", "2"]) == "1, 2"


def test_the_report_package_keeps_data_prose_and_html_apart():
    """``backend.share.report`` re-exports a data model, the prose builders and the HTML renderer,
    each in its own module; the renderer needs nothing of the data model's module."""
    import ast
    import inspect

    import backend.share.report as package
    from backend.share.report import render

    homes = {name: getattr(package, name).__module__ for name in ("Report", "Section")}
    assert set(homes.values()) == {"backend.share.report.model"}
    assert package.build_report.__module__ == "backend.share.report.build"
    assert package.render_html.__module__ == "backend.share.report.render"
    assert set(package.BUILDERS) == set(package.SECTIONS)
    imported = {
        node.module
        for node in ast.walk(ast.parse(inspect.getsource(render)))
        if isinstance(node, ast.ImportFrom)
    }
    assert not any(m and m.startswith("backend.share") for m in imported)
