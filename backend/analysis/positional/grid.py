"""Position in image models: the patch position table as a grid of similarities, and a probe
that reads a patch's row and column from each hidden state.

- Position-embedding similarity (Dosovitskiy et al. 2020, *An Image is Worth 16x16 Words*, arXiv
  2010.11929, Fig. 7): the cosine similarity of one patch's learned position embedding to every
  other patch's, drawn on the patch grid. A trained ViT learns 2-D structure: each patch is most
  similar to its own row and column, and to its neighbours.
- Row / column probe: the position probe of Luo et al. (:func:`isoscope.analysis.positional.table
  .probe_positions`, bias-free softmax classifier, split by image) with a patch's row, then its
  column, as the class. Prefix tokens ([CLS], [DIST], registers) have no grid position and are
  left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from isoscope.analysis.positional.table import ProbeResult, ProbeSettings, probe_positions
from isoscope.engine.arch.layout import PatchPositionTable
from isoscope.engine.budget.progress import Progress
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionResult

AXES = ("row", "column")


def patch_cosines(table: PatchPositionTable) -> np.ndarray:
    """Cosine similarity between every pair of patch position embeddings, float64
    (rows, cols, rows, cols): ``[r, c]`` is patch (r, c)'s similarity map over the grid."""
    rows, cols = table.grid
    vectors = np.asarray(table.patches, dtype=np.float64)  # (rows * cols, d), row-major
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)[:, None]
    return (unit @ unit.T).reshape(rows, cols, rows, cols)


def patch_grid_coordinates(word_id: np.ndarray, grid: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """(row, column) of each token's patch index ``word_id`` (row-major); -1 for prefix tokens."""
    index = np.asarray(word_id, dtype=np.int64)
    cols = int(grid[1])
    row = np.where(index >= 0, index // cols, -1)
    col = np.where(index >= 0, index % cols, -1)
    return row, col


@dataclass(frozen=True)
class GridProbe:
    """The row probe and the column probe (:class:`ProbeResult` each) of an image analysis."""

    grid: tuple[int, int]
    row: ProbeResult
    column: ProbeResult

    def frame(self):
        """One row per hidden state: held-out accuracy and baseline for row and column."""
        import pandas as pd  # lazy: a slow import that only the table views need

        return pd.DataFrame(
            {
                "state": self.row.state_names,
                "row_accuracy": self.row.accuracy,
                "column_accuracy": self.column.accuracy,
                "row_baseline": self.row.chance,
                "column_baseline": self.column.chance,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return {"grid": list(self.grid), "row": self.row.to_dict(), "column": self.column.to_dict()}


def grid_probe(
    result: ExtractionResult,
    settings: ProbeSettings | None = None,
    progress: Progress | None = None,
) -> GridProbe:
    """Probe each hidden state of an image analysis's token sample for the patch row and column.
    ``settings.max_position`` is replaced by the grid's side (every row and column is a class)."""
    grid = result.model.get("patch_grid")
    if not grid:
        raise InputError("the row / column probe needs an image analysis (a patch grid)")
    grid = (int(grid[0]), int(grid[1]))
    tokens = result.sample_tokens
    patch = np.flatnonzero(tokens.word_id >= 0)
    row, col = patch_grid_coordinates(tokens.word_id[patch], grid)
    settings = dataclasses.replace(
        settings or ProbeSettings(), max_position=max(2, *grid), exclude_special=False
    )
    vectors = result.sample_vectors[:, patch]
    fits = []
    for axis, (labels, side) in enumerate(((row, grid[0]), (col, grid[1]))):
        if side < 2:
            raise InputError(
                f"a {grid[0]}x{grid[1]} patch grid has one {AXES[axis]}: nothing to probe"
            )

        def step(done: int, total: int, axis: int = axis) -> bool | None:
            return progress(axis * total + done, 2 * total) if progress is not None else None

        fits.append(
            probe_positions(
                vectors,
                labels,
                tokens.text_id[patch],
                settings=settings,
                state_names=result.state_names,
                progress=step,
            )
        )
    return GridProbe(grid=grid, row=fits[0], column=fits[1])
