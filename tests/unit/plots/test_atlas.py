"""The atlas's points binary (issue 35) round-trips: coordinates, tokens, colourings, legend."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.projections.methods import Colouring, Projection
from isoscope.engine.extraction import TokenTable
from isoscope.plots.atlas import decode_points, encode_points

pytestmark = pytest.mark.unit


def test_points_round_trip():
    rng = np.random.default_rng(0)
    n = 101
    before = Projection(rng.normal(size=(n, 2)), "pca", 0, 0.0, np.array([0.4, 0.1]))
    after = Projection(rng.normal(size=(n, 2)), "umap", 0, 0.0, landmarks=40)
    words = np.array(["b", "a", "é", "a"] * 25 + ["z"])
    tokens = TokenTable(
        np.repeat(np.arange(n // 10 + 1), 10)[:n].astype(np.int32),
        (np.arange(n) % 10).astype(np.int32),
        words,
        np.zeros(n, np.int32),
        np.zeros(n, bool),
        np.zeros(n, bool),
    )
    order = ("a", "b", "other")
    kinds = np.where(np.isin(words, ["a", "b"]), words, "other").astype(object)
    colourings = {
        "token": Colouring(kinds, "categorical", "token", order),
        "position": Colouring(tokens.position.astype(float), "numeric", "position"),
    }
    header, arrays = decode_points(encode_points(before, after, colourings, tokens, ["t"] * 11))
    assert header["points"] == n
    np.testing.assert_allclose(arrays["coords"][:, :2], before.coords, rtol=1e-6)
    np.testing.assert_allclose(arrays["coords"][:, 2:], after.coords, rtol=1e-6)
    assert [header["vocab"][c] for c in arrays["token"]] == words.tolist()
    np.testing.assert_array_equal(arrays["text"], tokens.text_id)
    legend = {c["key"]: c for c in header["colourings"]}
    names = [legend["token"]["order"][c] for c in arrays[legend["token"]["array"]]]
    assert names == kinds.tolist()
    assert legend["position"]["max"] == 9.0
    assert header["methods"][1] == "landmark UMAP (40 fitted) + kNN placement of the rest"
