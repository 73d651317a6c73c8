"""isoscope's Python API, for notebooks and scripts. Plain Python; never imports streamlit.

    import isoscope as iso

    model = iso.load_model("default")       # "smollm2", a folder, a .gguf, "random:gpt2", ...
    corpus = iso.bundled_corpus()           # or iso.corpus_from_text("one text\\nanother")
    result = iso.extract(model, corpus)     # statistics of every hidden state + a token sample
    iso.outlier_dims_by_state(result)[-1]   # the last hidden state's outlier dimensions
    iso.outlier_heatmap(result, "mean")     # the Outlier dimensions page's heatmap (plotly Figure)

The names below are loaded on first use (``import isoscope`` itself is cheap). Everything else
lives in its layer, imported as usual: ``isoscope.engine`` (load, run, cache, save),
``isoscope.analysis.<topic>`` (one topic per package: geometry, layernorm, positional, activations,
compare, quant), ``isoscope.plots.<page>`` (the figure builders each page draws: they take an analysis's
result and return the same ``plotly.graph_objects.Figure`` the page shows) and ``isoscope.share``
(report, export, tour). The CLI is ``isoscope`` (:mod:`isoscope.cli`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
API = {
    # engine: load a model and a corpus, run the model once
    "load_model": "isoscope.engine.load.models",
    "random_like": "isoscope.engine.load.models",
    "bundled_corpus": "isoscope.engine.inputs.corpus",
    "corpus_from_text": "isoscope.engine.inputs.corpus",
    "load_corpus_file": "isoscope.engine.inputs.corpus",
    "ExtractionSettings": "isoscope.engine.extraction",
    "extract": "isoscope.engine.extraction",
    "cached_extract": "isoscope.engine.store.cached_extract",
    "save_analysis": "isoscope.engine.store.saved",
    "load_saved": "isoscope.engine.store.saved",
    # analyses
    "outlier_dims_by_state": "isoscope.analysis.outliers",
    "criteria_by_state": "isoscope.analysis.outliers",
    "anisotropy_by_state": "isoscope.analysis.anisotropy",
    "isotropy_by_state": "isoscope.analysis.anisotropy:by_state",
    "make_postprocessor": "isoscope.analysis.projections.postprocess",
    "ln_outliers": "isoscope.analysis.layernorm.params",
    "run_ablation": "isoscope.analysis.layernorm.ablation",
    "probe_positions": "isoscope.analysis.positional.table",
    "scan_massive": "isoscope.analysis.massive.scan",
    "compare": "isoscope.analysis.compare.comparison",
    # figures, as the pages draw them
    "outlier_heatmap": "isoscope.plots.outliers",
    "metrics_by_layer_figure": "isoscope.plots.anisotropy",
    # sharing
    "build_report": "isoscope.share.report",
}


def __getattr__(name: str) -> Any:
    target = API.get(name)
    if target is None:
        raise AttributeError(f"module 'backend' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute or name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
