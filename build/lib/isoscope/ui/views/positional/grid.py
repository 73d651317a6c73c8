"""The Positional page for image (and audio) models: the patch position table drawn on the
patch grid (ViT Fig. 7) and the row / column probe; the position-embeddings and probe tabs
hand over to these views."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from isoscope.analysis.positional import grid as positional_grid
from isoscope.analysis.positional.grid import GridProbe, patch_cosines
from isoscope.analysis.positional.params import PROBE_ITER, TEST_FRACTION
from isoscope.analysis.positional.table import (
    ProbeSettings,
)
from isoscope.engine.arch.layout import (
    PatchPositionTable,
    patch_position_table,
    position_scheme_note,
)
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.params import SEED
from isoscope.plots import positional as plots
from isoscope.ui.frame.literal import code, literal, message
from isoscope.ui.frame.page import explainer, show_notices
from isoscope.ui.sharing.downloads import download_buttons
from isoscope.ui.views.positional.shared import SOURCES
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.widgets.controls import choice_slider, interval_number, interval_slider
from isoscope.ui.work.cached import cached, heavy


@cached
def patch_table(loaded: LoadedModel) -> PatchPositionTable | None:
    """The position embeddings an image model adds to its patches (None: it adds none)."""
    return patch_position_table(loaded.encoder, loaded.layout)


@cached
def patch_similarities(loaded: LoadedModel) -> np.ndarray:
    """(rows, cols, rows, cols) cosines between patch position embeddings (ViT paper, Fig. 7)."""
    return patch_cosines(patch_table(loaded))


@heavy("Training row / column probes:")
def grid_probe(result: ExtractionResult, settings: ProbeSettings, *, progress) -> GridProbe:
    """The patch row and column probes per hidden state of an image analysis."""
    return positional_grid.grid_probe(result, settings, progress)


def patch_table_view(loaded, result: ExtractionResult) -> None:
    """An image model's patch position embeddings as similarity maps on the patch grid (ViT Fig. 7);
    an audio model, or an image model without a table, gets what it uses instead."""
    explainer(
        "What is this / references",
        f"""
A ViT adds one **position embedding** per patch (and one for [CLS]) to the patch embeddings before the first
layer. The map of a patch shows the cosine similarity of its position embedding to every other patch's, drawn
on the patch grid. Dosovitskiy et al. (Fig. 7) found that a trained ViT learns the 2-D layout by itself: a patch
is most similar to its neighbours and to the patches of its own row and column. A random-init model shows no
such structure. The table is read from the model's parameters (the one with a row per patch, plus prefix rows);
the grid and the prefix tokens from one traced forward pass through the checkpoint's processor.

Source: {SOURCES["vit"]}.
""",
    )
    layout = loaded.layout
    table = patch_table(loaded) if layout.modality == "image" else None
    if table is None:
        st.info(
            f"**{literal(loaded.info.display_name)}** has no table of learned position embeddings to draw: it uses "
            f"{position_scheme_note(loaded.encoder, layout)}."
            + (" The position probe tab works without one." if layout.modality == "image" else "")
        )
        return
    rows, cols = table.grid
    prefix = ", ".join(layout.prefix[: table.prefix_rows]) or "none"
    unplaced = [name for name in layout.prefix[table.prefix_rows :]]
    st.caption(
        f"{code(table.path)}: {table.prefix_rows} prefix row(s) ({prefix}) and {rows}x{cols} patch rows"
        + (f"; {', '.join(unplaced)} get no position embedding" if unplaced else "")
        + "."
        + (
            f" The table is the model's own {rows}x{cols} grid; for this "
            f"{table.interpolated_to[0]}x{table.interpolated_to[1]}-patch input the model "
            "interpolates it."
            if table.interpolated_to
            else ""
        )
    )
    if table.is_zero:
        st.info(
            "Every patch row of this table is zero, so there is no similarity to draw (a fixed "
            "table that was never filled in, or a checkpoint saved without it)."
        )
        return
    cosines = patch_similarities(loaded)
    mode = st.radio(
        "Show",
        ["one patch", "every patch"],
        horizontal=True,
        key="pos_grid_mode",
        help="every patch: the small maps laid out on the grid, as in the ViT paper's Fig. 7",
    )
    if mode == "one patch":
        c1, c2 = st.columns(2)
        row = int(c1.number_input("Patch row", 0, rows - 1, rows // 2, key="pos_grid_row"))
        col = int(c2.number_input("Patch column", 0, cols - 1, cols // 2, key="pos_grid_col"))
        fig = plots.patch_similarity_map(cosines, row, col)
        frame = pd.DataFrame(cosines[row, col]).rename_axis("row").reset_index()
        name = f"patch_position_similarity_r{row}c{col}"
    else:
        fig = plots.patch_similarity_multiples(cosines)
        frame = pd.DataFrame(cosines.reshape(rows * cols, rows * cols))
        name = "patch_position_similarity_all"
    chart_with_downloads(fig, key="pos_grid_chart", downloads="pos_grid", frame=frame, name=name)


def grid_probe_view(result: ExtractionResult) -> None:
    """Probes for the patch row and column per hidden state (Luo et al.'s probe on the grid)."""
    explainer(
        "What is this / references",
        f"""
The **position probe** of Luo et al. (a bias-free linear softmax classifier on a token vector, trained per hidden
state on the token sample) asked twice: which **row** of the patch grid is this patch in, and which **column**?
Images (not patches) are split into training and held-out sets, so an image never appears on both sides. Prefix
tokens ([CLS], [DIST], registers) have no grid position and are left out. The baseline always predicts the most
frequent row (column) of the training patches. A ViT's position embeddings are added before the first layer,
so the emb state should be read best; how much survives the layers is the question.

Sources: {SOURCES["luo"]}; {SOURCES["vit"]}.
""",
    )
    show_notices(result)
    c1, c2, c3 = st.columns(3)
    test_fraction = interval_slider(c1, "Held-out images", TEST_FRACTION, "pos_gprobe_test")
    seed = interval_number(c2, "Seed", SEED, "pos_gprobe_seed", help=None)
    iters = choice_slider(c3, "L-BFGS iterations", PROBE_ITER, "pos_gprobe_iter")
    try:
        settings = ProbeSettings(
            test_fraction=float(test_fraction), seed=int(seed), max_iter=int(iters)
        )
        probe = grid_probe(result, settings)
    except IsoscopeError as exc:
        st.error(message(exc))
        return
    rows, cols = probe.grid
    st.caption(
        f"{probe.row.n_train:,} training patches from {probe.row.n_train_texts} images · {probe.row.n_test:,} "
        f"held-out patches from {probe.row.n_test_texts} images · {rows} rows x {cols} columns"
    )
    fig = plots.grid_probe_lines(probe.row.state_names, probe.row, probe.column)
    st.plotly_chart(fig, width="stretch", key="pos_gprobe_chart")
    frame = probe.frame()
    st.dataframe(frame, hide_index=True, width="stretch")
    download_buttons(
        "pos_gprobe", fig=fig, frame=frame, json_data=probe.to_dict(), name="patch_grid_probe"
    )
