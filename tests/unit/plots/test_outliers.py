"""Figures and tables of the Outlier dimensions page (backend/plots/outliers.py) on the planted
result of the report tests: dim 7 shifted to -6 at hidden state 2, isotropic noise elsewhere."""

from __future__ import annotations

import json

import numpy as np
import pytest

from isoscope.analysis.outliers import (
    CRITERIA,
    OutlierThresholds,
    criteria_by_state,
)
from isoscope.plots.outliers import (
    CRITERION_SHORT,
    HEATMAP_STATS,
    category_summary,
    criteria_marks,
    dimension_by_category,
    headline_outlier,
    heatmap_values,
    outlier_frame_all,
    outlier_heatmap,
    outliers_json,
    state_outlier_frame,
    token_dim_heatmap,
)
from tests.report_inputs import planted_result

PLANTED_STATE, PLANTED_DIM = 2, 7


@pytest.fixture(scope="module")
def planted():
    return planted_result()


@pytest.fixture(scope="module")
def by_state(planted):
    return criteria_by_state(planted)


@pytest.mark.parametrize("stat", list(HEATMAP_STATS))
def test_heatmap_values_have_one_row_per_state(planted, stat):
    values = heatmap_values(planted, stat)
    assert values.shape == (3, 32)
    if stat == "|mean|":
        assert values[PLANTED_STATE].argmax() == PLANTED_DIM
    if stat == "argmin share":
        assert values[PLANTED_STATE, PLANTED_DIM] == 1.0  # every token's min is in dim 7


def test_an_unknown_statistic_names_the_accepted_ones(planted):
    with pytest.raises(ValueError, match="choose one of"):
        heatmap_values(planted, "median")


def test_outlier_heatmap_marks_the_planted_dim(planted, by_state):
    fig = outlier_heatmap(planted, "mean")
    heat, *marks = fig.data
    assert heat.z.shape == (3, 32) and heat.zmid == 0.0  # a diverging scale for the mean
    assert list(fig.layout.yaxis.ticktext) == ["emb", "1", "2"]
    zscore = next(m for m in marks if m.name.startswith("z"))
    assert list(zscore.x) == [PLANTED_DIM] and list(zscore.y) == [PLANTED_STATE]
    assert all(m.visible in (True, "legendonly") for m in marks)
    assert criteria_marks(by_state)["zscore"] == [[], [], [PLANTED_DIM]]


def test_state_frame_and_all_states_frame(planted, by_state):
    frame = state_outlier_frame(planted, PLANTED_STATE, by_state[PLANTED_STATE])
    assert frame["dim"].iloc[0] == PLANTED_DIM  # strongest |z| first
    assert frame["mean"].iloc[0] < -5 and frame["argmin share"].iloc[0] == 1.0
    assert bool(frame[f"by {CRITERION_SHORT['zscore']}"].iloc[0])
    assert state_outlier_frame(planted, 0, {c: [] for c in CRITERIA}).empty
    every = outlier_frame_all(planted, by_state)
    assert set(every["hidden state"]) <= {"emb", "1", "2"}
    assert PLANTED_DIM in every[every["hidden state"] == "2"]["dim"].tolist()


def test_outliers_json_is_strict_and_names_the_model(planted, by_state):
    payload = json.loads(outliers_json(planted, by_state, OutlierThresholds()))
    assert payload["model"] == "synthetic"
    assert [s["name"] for s in payload["hidden_states"]] == ["emb", "1", "2"]
    assert payload["hidden_states"][PLANTED_STATE]["zscore"] == [PLANTED_DIM]


def test_token_heatmap_rows_are_tokens_with_the_outlier_dims_marked():
    hidden = np.arange(12, dtype=np.float64).reshape(3, 4)
    fig = token_dim_heatmap(hidden, ["[CLS]", "a", "b"], "2", outlier_dims=[1, 3])
    heat, marks = fig.data
    assert heat.z.shape == (3, 4)
    assert list(fig.layout.yaxis.ticktext) == ["0: [CLS]", "1: a", "2: b"]
    assert list(marks.x) == [1, 3] and list(marks.text) == ["1", "3"]
    assert len(token_dim_heatmap(hidden, ["x", "y", "z"], "2").data) == 1


def test_category_box_and_summary_leave_empty_categories_out():
    values = np.array([5.0, 1.0, 2.0, 3.0])
    categories = np.array(["position 0", "other", "other", "punctuation"])
    fig = dimension_by_category(values, categories, 7, "2")
    assert [t.name for t in fig.data] == ["position 0 (n=1)", "punctuation (n=1)", "other (n=2)"]
    summary = category_summary(values, categories)
    assert summary["token type"].tolist() == ["position 0", "punctuation", "other"]
    assert summary.set_index("token type").loc["other", "mean"] == 1.5


def test_headline_outlier_is_the_planted_dim(planted, by_state):
    head = headline_outlier(planted, by_state)
    assert head["dim"] == PLANTED_DIM and head["states"] == ["2"] and head["state"] == "2"
    assert head["mean"] < -5 and 0 < head["typical"] < 1
    empty = [{c: [] for c in CRITERIA} for _ in range(3)]
    assert headline_outlier(planted, empty) is None
