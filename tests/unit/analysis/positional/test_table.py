"""Position probe (Luo et al. 2021) on synthetic token vectors with a planted position code, and
the position-table geometry on a synthetic table."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.positional.table import (
    ProbeSettings,
    analyse_position_table,
    probe_positions,
    split_by_text,
)
from isoscope.engine.errors import InputError
from isoscope.plots.positional import contribution_bars, cosine_heatmap, probe_accuracy_line


def _tokens(n_texts: int = 120, length: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length // 2, length + 1, size=n_texts)
    text_id = np.repeat(np.arange(n_texts), lengths)
    position = np.concatenate([np.arange(k) for k in lengths])
    return rng, text_id, position


def test_planted_position_code_is_found_and_noise_is_not():
    rng, text_id, position = _tokens()
    d = 32
    code = np.zeros((12, d))
    code[:, :6] = rng.normal(size=(12, 6)) * 3.0  # position lives in dims 0-5 only
    noise = rng.normal(size=(len(position), d))
    planted = noise + code[position]
    vectors = np.stack([planted, noise]).astype(np.float32)
    probe = probe_positions(
        vectors,
        position,
        text_id,
        settings=ProbeSettings(max_position=12, max_iter=60),
        state_names=["planted", "noise"],
    )
    assert probe.accuracy[0] > 0.9
    assert probe.accuracy[1] < probe.chance + 0.1
    assert probe.accuracy[1] < 0.25
    # The contributions point at the planted dimensions.
    top = set(np.argsort(-probe.contributions[0])[:6].tolist())
    assert top == set(range(6))
    assert probe.contributions[0, :6].min() > 3 * probe.contributions[0, 6:].max()
    assert probe.n_train_texts + probe.n_test_texts == 120
    assert set(probe.to_dict()) >= {"accuracy", "chance", "num_classes"}


def test_positions_beyond_the_cap_are_dropped_and_specials_excluded():
    rng, text_id, position = _tokens(n_texts=40)
    vectors = rng.normal(size=(1, len(position), 8))
    special = position == 0
    probe = probe_positions(
        vectors, position, text_id, special, ProbeSettings(max_position=5, max_iter=5)
    )
    assert probe.classes.tolist() == [1, 2, 3, 4]
    assert probe.n_train + probe.n_test == int(((position < 5) & ~special).sum())
    with pytest.raises(InputError):
        probe_positions(
            vectors, position, text_id, special, ProbeSettings(max_position=2, max_iter=5)
        )


def test_split_is_by_text():
    _, text_id, _ = _tokens(n_texts=50)
    held_out = split_by_text(text_id, 0.2, seed=3)
    assert not set(text_id[held_out]) & set(text_id[~held_out])
    assert len(set(text_id[held_out])) == 10
    assert np.array_equal(held_out, split_by_text(text_id, 0.2, seed=3))
    with pytest.raises(InputError):
        split_by_text(np.zeros(5, dtype=int), 0.2, 0)


@pytest.mark.parametrize(
    "kwargs", [{"max_position": 1}, {"test_fraction": 0.95}, {"max_iter": 0}, {"l2": -1.0}]
)
def test_bad_probe_settings(kwargs):
    with pytest.raises(InputError):
        ProbeSettings(**kwargs)


def test_position_table_geometry_on_a_sinusoidal_table():
    pos = np.arange(64)[:, None]
    freqs = 1.0 / 10_000 ** (np.arange(0, 16, 2) / 16)
    table = np.zeros((64, 16))
    table[:, 0::2] = np.sin(pos * freqs)
    table[:, 1::2] = np.cos(pos * freqs)
    table[:, 5] += 3.0  # one dimension holds every position's maximum
    report = analyse_position_table(table, num_positions=32)
    assert report.cosine.shape == (32, 32)
    assert np.allclose(np.diag(report.cosine), 1.0)
    assert report.cosine[0, 1] > report.cosine[0, 20]  # neighbours are more alike
    assert report.argmax_share[5] == 1.0
    assert report.top_extreme_dims(1)[0]["dim"] == 5
    assert report.pca_explained.sum() <= 1.0 + 1e-12 and report.pca_explained[0] > 0.2
    fig = cosine_heatmap(report.cosine)
    assert fig.data[0].z.shape == (32, 32)


def test_probe_figures():
    fig = probe_accuracy_line(["emb", "1"], np.array([0.9, 0.5]), np.array([1.0, 0.8]), 0.1)
    assert [t.name for t in fig.data] == [
        "held-out texts",
        "training texts",
        "majority-class baseline",
    ]
    bars = contribution_bars(np.array([0.1, 0.5, 0.2]), outliers=[1], top=2)
    assert list(bars.data[0].x) == ["1", "2"]
    assert bars.data[0].marker.color[0] == "#d62728"
