"""The Queries & keys tab: mean query / key norms, their cosine and attention entropy per
head, trained vs random init (Godey et al. 2023), rotary applied or before it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from isoscope.analysis.positional.params import QK_MAX_LENGTH
from isoscope.analysis.positional.qk import METRICS, ROTATIONS, QKStats, qk_stats
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.load import models as engine_models
from isoscope.engine.load.models import LoadedModel
from isoscope.plots import positional as plots
from isoscope.ui.frame.literal import message
from isoscope.ui.frame.page import explainer
from isoscope.ui.views.positional.shared import SOURCES, text_extraction
from isoscope.ui.widgets.charts import chart_with_downloads
from isoscope.ui.work.cached import cached, heavy


@cached
def random_like(loaded: LoadedModel) -> LoadedModel:
    """The same architecture with fresh weights (seed 0)."""
    return engine_models.random_like(loaded, seed=0)


def queries_keys(
    loaded: LoadedModel,
    result: ExtractionResult,
    n_texts: int,
    max_length: int,
    random_init: bool,
    rotation: str = "applied",
) -> QKStats:
    """Mean query / key statistics per query head on the first ``n_texts`` texts (Godey et al.),
    with the rotary embedding ``applied`` or from ``before`` it."""
    model = random_like(loaded) if random_init else loaded  # here: a worker thread has no session
    if random_init:
        label = "random init"
    else:
        label = "trained" if not loaded.info.random_init else loaded.info.display_name
    return _queries_keys(model, result, n_texts, max_length, label, rotation)


@heavy("Queries and keys:", "texts")
def _queries_keys(
    model: LoadedModel, result: ExtractionResult, n_texts: int, max_length: int, label: str,
    rotation: str, *, progress,
) -> QKStats:  # fmt: skip
    texts = result.texts[:n_texts]
    return qk_stats(model, texts, max_length, label=label, progress=progress, rotation=rotation)


def queries_keys_tab() -> None:
    """Mean query / key norms, their cosine and attention entropy per head, trained vs random (Godey et al.)."""
    chosen = text_extraction(
        "The queries & keys view",
        "runs the corpus texts again through the model's attention",
    )
    if chosen is None:
        return
    loaded, result = chosen
    queries_keys_explainer()
    rotary = loaded.info.position_embedding.startswith("rotary")
    rotation = rotation_control() if rotary else "applied"
    c1, c2, c3 = st.columns(3)
    n_texts = c1.slider(
        "Texts",
        4,
        int(max(4, min(320, len(result.texts)))),
        int(min(64, len(result.texts))),
        key="pos_qk_texts",
    )
    metric = c2.selectbox("Metric", list(METRICS), format_func=METRICS.get, key="pos_qk_metric")
    with_random = c3.checkbox("Compare with random init", True, key="pos_qk_random")
    max_length = int(min(QK_MAX_LENGTH.default, result.settings.max_length))
    texts = result.texts[:n_texts]
    try:
        trained = queries_keys(loaded, result, n_texts, max_length, False, rotation)
        stats = [trained]
        if with_random:
            stats.append(queries_keys(loaded, result, n_texts, max_length, True, rotation))
    except IsoscopeError as exc:
        st.error(message(exc))
    else:
        queries_keys_view(stats, metric, rotary, len(texts), max_length)


def queries_keys_explainer() -> None:
    explainer(
        "What is this / references",
        f"""
Godey et al. link anisotropy to the attention mechanism: during training the **mean query** and **mean key** of a head
move away from the origin, and their directions become aligned (or opposed), so all queries share a common
component of their dot products with all keys. Shown per layer and query head, over all non-padding tokens: the norms
of the mean query and mean key, their cosine, and the attention entropy (raw, and divided by log(number of attendable
keys): 1 = uniform). Queries and keys are read as the attention uses them (projection biases, q/k norms and the
rotary embedding included), and the entropy comes from the model's own attention weights under its own mask
(causal, and a sliding window where the config has one). A random-init copy of the same architecture is the contrast.

**Grouped-query attention**: H query heads share G key heads, and query head h attends with key head
floor(h / (H / G)); each column then reads `h·kv`, and every statistic is the query head's against its own key head.

**Rotary positions** (Su et al.): q_m = R(m) W_q x_m, so the mean of the rotated queries mixes positions, while before
rotation it is the projection's own drift. The rotation toggle shows either; the figure title says which.

Sources: {SOURCES["godey"]}; {SOURCES["rope"]}.
""",
    )


def rotation_control() -> str:
    """Queries and keys with the rotary embedding applied, or from before it."""
    return st.radio(
        "Rotary embedding",
        ROTATIONS,
        format_func={
            "applied": "applied (as the attention uses them)",
            "before": "before rotation",
        }.get,
        horizontal=True,
        key="pos_qk_rotation",
    )


def queries_keys_view(
    stats: list[QKStats], metric: str, rotary: bool, n_texts: int, max_length: int
) -> None:
    """Heatmaps and layer lines of one metric (trained, and random init when asked), and the caption."""
    trained = stats[0]
    title = METRICS[metric] + (f" · rotary {trained.rotation}" if rotary else "")
    fig_h = plots.qk_heatmaps(stats, metric, title)
    frame = pd.concat([s.frame() for s in stats], ignore_index=True)
    json_data = [s.to_dict() for s in stats]
    # each chart with its own PNG right below it, so a PNG is of the chart above it
    chart_with_downloads(
        fig_h,
        key="pos_qk_heat_chart",
        downloads="pos_qk",
        frame=frame,
        json_data=json_data,
        name="queries_keys",
    )
    fig_l = plots.qk_layer_lines(stats, metric, METRICS[metric])
    chart_with_downloads(
        fig_l, key="pos_qk_line_chart", downloads="pos_qk_lines", name="queries_keys_by_layer"
    )
    groups = trained.num_kv_heads
    heads = trained.kv_head.size
    st.caption(
        f"{trained.num_tokens:,} tokens from {n_texts} texts (max {max_length} tokens each). "
        + (
            f"{heads} query heads share {groups} key heads ({heads // groups} per key head). "
            if groups < heads
            else ""
        )
        + f"Queries and keys read at {trained.capture}; rotation: {trained.rotation}; "
        f"entropy under {trained.mask}."
    )
