"""The report's HTML: self-contained, deterministic, plotly.js inlined once, every finding shown."""

from __future__ import annotations

import html
import re

from isoscope.share.report import ReportSettings, build_report
from tests.report_inputs import QUICK


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
