"""Position in image models on planted data: the patch similarity grid of a table whose rows code
(row, column), and the row / column probe on patch vectors that code only the row."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.positional.grid import grid_probe, patch_cosines, patch_grid_coordinates
from isoscope.analysis.positional.table import ProbeSettings
from isoscope.engine.arch.layout import PatchPositionTable
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import TokenTable
from isoscope.plots.positional import (
    grid_probe_lines,
    patch_similarity_map,
    patch_similarity_multiples,
)
from tests.synthetic import result_from_vectors

GRID = (3, 4)


def _row_column_table() -> PatchPositionTable:
    """Patch (r, c)'s vector is onehot(r) + onehot(rows + c): same row or column -> cos 0.5."""
    rows, cols = GRID
    vectors = np.zeros((rows * cols, rows + cols))
    for r in range(rows):
        for c in range(cols):
            vectors[r * cols + c, [r, rows + c]] = 1.0
    return PatchPositionTable(vectors, GRID, prefix_rows=1, path="embeddings.position_embeddings")


def test_patch_cosines_are_each_patch_s_map_on_the_grid():
    cosines = patch_cosines(_row_column_table())
    assert cosines.shape == (3, 4, 3, 4)
    one = cosines[1, 2]
    assert one[1, 2] == pytest.approx(1.0)
    assert one[1, 0] == pytest.approx(0.5) and one[0, 2] == pytest.approx(0.5)  # row / column
    assert one[0, 0] == pytest.approx(0.0)
    np.testing.assert_allclose(cosines.reshape(12, 12), cosines.reshape(12, 12).T)


def test_zero_table_is_flagged():
    table = PatchPositionTable(np.zeros((12, 5)), GRID, 0, "p")
    assert table.is_zero and not _row_column_table().is_zero


def test_grid_coordinates_are_row_major_and_prefix_is_minus_one():
    row, col = patch_grid_coordinates(np.array([-1, 0, 3, 4, 11]), GRID)
    assert row.tolist() == [-1, 0, 0, 1, 2] and col.tolist() == [-1, 0, 3, 0, 3]


def test_similarity_figures():
    cosines = patch_cosines(_row_column_table())
    one = patch_similarity_map(cosines, 1, 2)
    np.testing.assert_allclose(one.data[0].z, cosines[1, 2])
    assert list(one.data[1].x) == [2] and list(one.data[1].y) == [1]
    tiles = patch_similarity_multiples(cosines)
    z = np.asarray(tiles.data[0].z, dtype=float)
    assert z.shape == (3 * 4 - 1, 4 * 5 - 1) and len(tiles.data) == 1
    np.testing.assert_allclose(z[4:7, 10:14], cosines[1, 2])  # tile (1, 2)
    assert np.isnan(z[3]).all()  # the blank line between tile rows


def _image_result(n_images: int = 40, seed: int = 0):
    """[CLS] + a 3x4 grid per image; patch vectors code the row (strongly), not the column."""
    rng = np.random.default_rng(seed)
    rows, cols = GRID
    per = 1 + rows * cols
    word = np.tile(np.arange(-1, rows * cols), n_images).astype(np.int32)
    text_id = np.repeat(np.arange(n_images), per).astype(np.int32)
    tokens = TokenTable(
        text_id=text_id,
        position=np.tile(np.arange(per), n_images).astype(np.int32),
        token=np.array(["x"] * len(word)),
        word_id=word,
        is_special=word < 0,
        is_punct=np.zeros(len(word), dtype=bool),
    )
    d = 16
    vectors = rng.normal(0, 0.3, size=(2, len(word), d))
    patch = word >= 0
    vectors[1, patch, (word[patch] // cols)] += 4.0  # state 1 codes the row in dims 0..2
    model = {"source": "synthetic", "display_name": "synthetic", "patch_grid": list(GRID)}
    return result_from_vectors(vectors, tokens, model=model)


def test_grid_probe_finds_the_planted_row_and_not_the_column():
    probe = grid_probe(_image_result(), ProbeSettings(max_iter=30))
    assert probe.grid == GRID
    assert probe.row.accuracy[1] > 0.95  # the state that codes the row
    assert probe.row.accuracy[0] < 0.6 and probe.column.accuracy[1] < 0.6
    assert set(probe.row.classes.tolist()) == {0, 1, 2}
    assert set(probe.column.classes.tolist()) == {0, 1, 2, 3}
    assert probe.row.n_train + probe.row.n_test == 40 * 12  # prefix tokens left out
    frame = probe.frame()
    assert list(frame.columns[:3]) == ["state", "row_accuracy", "column_accuracy"]
    fig = grid_probe_lines(probe.row.state_names, probe.row, probe.column)
    assert [t.name for t in fig.data][::2] == ["row (held-out images)", "column (held-out images)"]


def test_grid_probe_refuses_a_text_analysis():
    result = _image_result()
    text = result_from_vectors(result.sample_vectors, result.tokens)
    with pytest.raises(InputError, match="image analysis"):
        grid_probe(text)
