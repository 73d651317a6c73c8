"""isoscope's Python API, for notebooks and scripts. Plain Python; never imports streamlit.

    import backend as iso

    model = iso.load_model("default")       # "smollm2", a folder, a .gguf, "random:gpt2", ...
    corpus = iso.bundled_corpus()           # or iso.corpus_from_text("one text\\nanother")
    result = iso.extract(model, corpus)     # statistics of every hidden state + a token sample
    iso.outlier_dims_by_state(result)[-1]   # the last hidden state's outlier dimensions
    iso.outlier_heatmap(result, "mean")     # the Outlier dimensions page's heatmap (plotly Figure)

The names below are loaded on first use (``import backend`` itself is cheap). Everything else
lives in its layer, imported as usual: ``backend.engine`` (load, run, cache, save),
``backend.analysis.<topic>`` (one topic per package: geometry, layernorm, positional, activations,
compare, quant), ``backend.plots.<page>`` (the figure builders each page draws: they take an analysis's
result and return the same ``plotly.graph_objects.Figure`` the page shows) and ``backend.share``
(report, export, tour). The CLI is ``isoscope`` (:mod:`backend.cli`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
API = {
    # engine: load a model and a corpus, run the model once
    "load_model": "backend.engine.load.models",
    "random_like": "backend.engine.load.models",
    "bundled_corpus": "backend.engine.inputs.corpus",
    "corpus_from_text": "backend.engine.inputs.corpus",
    "load_corpus_file": "backend.engine.inputs.corpus",
    "ExtractionSettings": "backend.engine.extraction",
    "extract": "backend.engine.extraction",
    "cached_extract": "backend.engine.store.cached_extract",
    "save_analysis": "backend.engine.store.saved",
    "load_saved": "backend.engine.store.saved",
    # analyses
    "outlier_dims_by_state": "backend.analysis.geometry.outliers",
    "criteria_by_state": "backend.analysis.geometry.outliers",
    "anisotropy_by_state": "backend.analysis.geometry.isotropy",
    "isotropy_by_state": "backend.analysis.geometry.isotropy:by_state",
    "make_postprocessor": "backend.analysis.geometry.postprocess",
    "ln_outliers": "backend.analysis.layernorm.params",
    "run_ablation": "backend.analysis.layernorm.ablation",
    "probe_positions": "backend.analysis.positional.table",
    "scan_massive": "backend.analysis.activations.scan",
    "compare": "backend.analysis.compare.comparison",
    # figures, as the pages draw them
    "outlier_heatmap": "backend.plots.outliers",
    "metrics_by_layer_figure": "backend.plots.anisotropy",
    # sharing
    "build_report": "backend.share.report",
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
