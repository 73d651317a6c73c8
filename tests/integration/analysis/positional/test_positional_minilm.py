"""Positional information on the bundled MiniLM: the probe (Luo et al.), the position table, the
queries/keys statistics (Godey et al.) and the variance measurement on a loaded causal model."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.outliers import outlier_dims
from isoscope.analysis.positional.nope import variance_on_model
from isoscope.analysis.positional.table import (
    ProbeSettings,
    analyse_position_table,
    embedding_layernorm,
    extreme_dims_vs_outliers,
    position_table_weights,
    probe_result,
)
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.load.models import load_model


@pytest.fixture(scope="module")
def probe(minilm_result):
    return probe_result(minilm_result, ProbeSettings(max_position=64, seed=0))


def test_probe_accuracy_is_high_early_and_falls_with_depth(probe, minilm_result):
    acc = probe.accuracy
    print(
        "probe accuracy per state:",
        dict(zip(probe.state_names, np.round(acc, 3), strict=True)),
        "chance",
        probe.chance,
    )
    assert len(acc) == minilm_result.num_states == 7
    # Measured (4000-token sample): emb ~0.9, layer 1 ~0.9, then down to ~0.25 at layer 6.
    assert acc[0] > 0.75 and acc[1] > 0.75
    assert acc[-1] < 0.5
    assert acc[0] - acc[-1] > 0.35
    assert acc[1] > acc[3] > acc[-1]
    assert acc[-1] > probe.chance  # still above the majority baseline
    assert probe.contributions.shape == (7, 384)


def test_position_table_and_embedding_layernorm(minilm, minilm_result):
    weights = position_table_weights(minilm)
    assert weights.shape == (512, 384)
    report = analyse_position_table(weights, 64)
    assert np.allclose(np.diag(report.cosine), 1.0)
    assert report.cosine[10, 11] > report.cosine[10, 60]  # neighbouring positions are more alike
    found = {
        name: outlier_dims(minilm_result, s) for s, name in enumerate(minilm_result.state_names)
    }
    rows = extreme_dims_vs_outliers(report, found)
    assert any(r["dim"] == 223 and "1" in r["hidden-state outlier in"] for r in rows)
    name, gamma, beta = embedding_layernorm(minilm)
    assert name == "emb.ln" and gamma.shape == beta.shape == (384,)


def test_no_table_is_a_clear_error():
    loaded = load_model("random:gpt2-nope:layers=1,width=32,heads=2", device="cpu")
    with pytest.raises(UnsupportedModelError, match="no learned absolute position table"):
        position_table_weights(loaded)


def test_variance_on_a_loaded_causal_model(tiny_gpt2_dir, bundled):
    loaded = load_model(str(tiny_gpt2_dir), device="cpu")
    curves = variance_on_model(loaded, bundled.texts[:40], max_length=32)
    assert curves.causal
    assert curves.attn_mean.shape == (2, len(curves.positions))
    assert np.all(curves.attn_mean > 0)
    # A random GPT-2 with a (random) position table: attention still averages over the prefix.
    assert curves.slopes[0] < -0.3
