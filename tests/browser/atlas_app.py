"""A one-chart Streamlit app for the atlas's browser test and ``benchmarks/million.py``: draws the
points file named by ``ISOSCOPE_ATLAS_PAYLOAD``, else :func:`synthetic_points` of
``ISOSCOPE_ATLAS_POINTS`` (default 100,000) random points. Run: ``streamlit run tests/browser/atlas_app.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

NEEDLE = "needle"  # the token of point 0, drawn alone in the top-right corner of both panels


def synthetic_points(n: int, seed: int = 0) -> bytes:
    """``n`` points in 50 texts of random tokens, two Gaussian blobs per panel; point 0 (token
    :data:`NEEDLE`, text 0 position 0) sits apart at (10, 10)."""
    from isoscope.analysis.projections.methods import Projection, token_colouring
    from isoscope.engine.extraction import TokenTable
    from isoscope.plots.atlas import encode_points

    rng = np.random.default_rng(seed)
    coords = rng.normal(size=(2, n, 2)).astype(np.float64)
    coords[:, : n // 2] += 4.0
    coords[:, 0] = 10.0
    texts = 50
    text_id = np.sort(rng.integers(0, texts, n)).astype(np.int32)
    text_id[0] = 0
    starts = np.searchsorted(text_id, np.arange(texts))
    position = (np.arange(n) - starts[text_id]).astype(np.int32)
    token = np.array([f"tok{i}" for i in rng.integers(0, 300, n)], dtype=object)
    token[0] = NEEDLE
    table = TokenTable(
        text_id,
        position,
        token.astype(str),
        position.copy(),
        position == 0,
        np.zeros(n, dtype=bool),
    )
    colourings = {
        by: token_colouring(table, table, by) for by in ("category", "token", "frequency")
    }
    before, after = (Projection(c, "pca", seed, 0.0, np.array([0.5, 0.2])) for c in coords)
    snippets = [f"synthetic text {t}" for t in range(texts)]
    return encode_points(before, after, colourings, table, snippets)


def main() -> None:
    import streamlit as st

    from isoscope.ui.widgets.atlas import atlas_chart

    st.title("Atlas")
    payload_file = os.environ.get("ISOSCOPE_ATLAS_PAYLOAD")
    if payload_file:
        payload = Path(payload_file).read_bytes()
    else:
        payload = synthetic_points(int(os.environ.get("ISOSCOPE_ATLAS_POINTS", "100000")))
    atlas_chart(payload, key="atlas")


if __name__ == "__main__":
    main()
