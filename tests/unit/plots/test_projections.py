"""Patch thumbnails of the projection figure (backend/plots/projections.py): each point's patch
cut from the image the model sees, the count and byte caps, prefix tokens without one, and the
figure carrying the images once (layout.meta) with each trace's point -> thumbnail map."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from isoscope.analysis.projections.methods import Colouring, before_after
from isoscope.plots.projections import before_after_figure, patch_thumbnails, png_data_uri

GRID = (2, 3)


def _view(image: int) -> np.ndarray:
    """A 14 x 21 image whose patch (r, c) (7 px) is filled with 10 * image + 3 * r + c."""
    view = np.zeros((14, 21, 3), dtype=np.uint8)
    for r in range(2):
        for c in range(3):
            view[r * 7 : (r + 1) * 7, c * 7 : (c + 1) * 7] = 10 * image + 3 * r + c
    return view


def _decode(uri: str) -> np.ndarray:
    raw = base64.b64decode(uri.removeprefix("data:image/png;base64,"))
    return np.asarray(Image.open(io.BytesIO(raw)))


def test_each_thumbnail_is_its_patch_and_prefix_tokens_get_none():
    images = np.array([0, 1, 1, 2])
    patches = np.array([4, -1, 0, 5])  # r1c1, a [CLS], r0c0, r1c2
    thumbs = patch_thumbnails(_view, images, patches, GRID)
    assert thumbs[1] == ""
    assert _decode(thumbs[0]).shape == (7, 7, 3)
    assert [int(_decode(t)[0, 0, 0]) for t in (thumbs[0], thumbs[2], thumbs[3])] == [4, 10, 25]


def test_the_count_and_byte_caps_apply_in_point_order():
    images, patches = np.zeros(10, dtype=int), np.arange(10) % 6
    assert sum(bool(t) for t in patch_thumbnails(_view, images, patches, GRID, max_points=4)) == 4
    one = len(png_data_uri(_view(0)[:7, :7]))
    capped = patch_thumbnails(_view, images, patches, GRID, max_bytes=int(2.5 * one))
    assert [bool(t) for t in capped][:3] == [True, True, False] and not any(capped[3:])


def test_figure_carries_the_images_once_and_a_map_per_trace():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 4))
    before, after = before_after(x, np.arange(12), "pca", "standardize")
    colouring = Colouring(np.array(["a", "b"] * 6, dtype=object), "categorical", "k", ("a", "b"))
    hover = np.array([f"p{i}" for i in range(12)], dtype=object)
    thumbs = ["", "u1", "u2", "", "", "u5"] + [""] * 6
    fig = before_after_figure(before, after, colouring, hover, thumbnails=thumbs)
    assert fig.layout.meta["thumbnails"] == ["u1", "u2", "u5"]
    by_name = {tr.name: tr for tr in fig.data if tr.xaxis == "x2"}
    assert by_name["a"].meta == {"thumbnail_of": {"1": 1}}  # a's points 0, 2, 4: point 1 is u2
    assert by_name["b"].meta == {"thumbnail_of": {"0": 0, "2": 2}}  # b's 1, 3, 5
    plain = before_after_figure(before, after, colouring, hover)
    assert plain.layout.meta is None and all(tr.meta is None for tr in plain.data)
    numeric = before_after_figure(
        before, after, Colouring(np.arange(12.0), "numeric", "i"), hover, thumbnails=thumbs
    )
    assert numeric.data[0].meta == {"thumbnail_of": {"1": 0, "2": 1, "5": 2}}
