"""isoscope backend: model loading, extraction and analyses. Plain Python; never imports streamlit.

Public entry points:
- :func:`backend.engine.models.load_model` loads any supported encoder/decoder (see its docstring).
- :func:`backend.engine.corpus.load_corpus_file` / :func:`backend.engine.corpus.bundled_corpus` give a Corpus.
- :func:`backend.engine.extraction.extract` runs the model once and returns an :class:`ExtractionResult`.
- analyses (``backend.analysis.geometry.outliers``, ``backend.analysis.geometry.isotropy``, ...)
  are pure functions on arrays.
"""

from __future__ import annotations

__version__ = "0.1.0"
