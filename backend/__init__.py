"""isoscope backend: model loading, extraction and analyses. Plain Python; never imports streamlit.

Public entry points:
- :func:`backend.models.load_model` loads any supported encoder/decoder (see its docstring).
- :func:`backend.corpus.load_corpus_file` / :func:`backend.corpus.bundled_corpus` give a Corpus.
- :func:`backend.extract.extract` runs the model once and returns an :class:`ExtractionResult`.
- analyses (``backend.outliers``, ``backend.isotropy``, ...) are pure functions on arrays.
"""

from __future__ import annotations

__version__ = "0.1.0"
