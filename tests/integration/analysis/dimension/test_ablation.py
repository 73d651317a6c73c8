"""The ablation on a tiny Llama: zeroing a planted dimension that every token carries at a huge
value changes the model far more than the random control dimensions; at the last state (the final
norm's output) and at the embeddings too."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.dimension import DimensionSettings, dimension_card
from tests import zoo
from tests.dimension_models import TEXTS, D
from tests.dimension_models import load_tiny as _load


@pytest.mark.parametrize("state", [0, 1, 2])
def test_a_planted_dimension_matters_more_than_controls(tmp_path, state):
    loaded = _load(tmp_path, zoo, "llama", mlp_bias=True, num_hidden_layers=3)
    with torch.no_grad():
        loaded.model.layers[0].mlp.down_proj.weight[D].zero_()
        loaded.model.layers[0].mlp.down_proj.bias[D] = 40.0
    settings = DimensionSettings(state=state, dim=D, ablation_texts=3, controls=3)
    ablation = dimension_card(loaded, TEXTS, settings).ablation
    assert ablation["texts"] == 3 and len(ablation["controls"]) == 3
    key = "final_state_relative_change"
    if state == 1:  # the state the planted value lives at
        assert ablation["zero"][key] > 3 * ablation["controls_mean"]["zero"][key]
    for mode in ("zero", "mean"):
        assert ablation[mode][key] >= 0
    assert ablation["mean"][key] <= ablation["zero"][key] + 1e-6 or state != 1
