"""The Quantization readiness page's body (pages/quant.py): the opening (explainer, controls and
the analysis behind the run button) in ``run``, the verdict and end metrics in ``summary``, the
decision and its llm-compressor recipe in ``decision``, then one module per tab: ``strip``,
``tokens``, ``schemes``, ``sensitivity``, ``before_after`` and ``sites``; what they share in
``shared``. Each tab runs only while it is open (lazy tabs); the arithmetic lives in
isoscope.analysis.quant."""

from __future__ import annotations

from isoscope.analysis.quant.readiness import QuantReport
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel
from isoscope.ui.frame.tabs import lazy_tabs
from isoscope.ui.views.quant.before_after import before_after_tab
from isoscope.ui.views.quant.schemes import schemes_tab
from isoscope.ui.views.quant.sensitivity import sensitivity_tab
from isoscope.ui.views.quant.sites import sites_tab
from isoscope.ui.views.quant.strip import strip_tab
from isoscope.ui.views.quant.tokens import tokens_tab

TABS = ["Layers × role", "Token × channel", "Schemes", "Sensitivity", "Before / after", "Sites"]


def tabs(
    loaded: LoadedModel, corpus: Corpus, report: QuantReport, n_texts: int, max_length: int
) -> None:
    """The six tabs, each run only while it is open."""
    lazy_tabs(
        TABS,
        (
            lambda: strip_tab(report),
            lambda: tokens_tab(loaded, corpus, report, n_texts, max_length),
            lambda: schemes_tab(report),
            lambda: sensitivity_tab(loaded, corpus, report, n_texts, max_length),
            lambda: before_after_tab(loaded, corpus, report, n_texts, max_length),
            lambda: sites_tab(loaded, corpus, report),
        ),
        key="quant_tab",
    )
