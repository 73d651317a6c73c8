"""The comparison's records on planted arrays: a side's sizes, the LayerNorm dims that moved most,
and the long table of LayerNorm differences."""

from __future__ import annotations

import numpy as np

from isoscope.analysis.compare.records import LNDifference, SideSummary


def _side(num_states: int = 3, d: int = 5) -> SideSummary:
    return SideSummary(
        label="A",
        model={"source": "synthetic"},
        corpus_name="planted",
        state_names=tuple(["emb"] + [str(i) for i in range(1, num_states)]),
        anisotropy=np.zeros(num_states),
        isoscore=np.ones(num_states),
        outliers=((),) * num_states,
        mean=np.zeros((num_states, d)),
        top_k=1,
        top_share=np.zeros(num_states),
        top_dims=((0,),) * num_states,
    )


def test_side_summary_sizes_come_from_its_arrays():
    side = _side(num_states=4, d=7)
    assert side.num_states == 4 and side.hidden_size == 7
    assert isinstance(side.hidden_size, int)


def test_moved_dims_rank_by_the_largest_gamma_or_beta_change():
    d_gamma = np.zeros((2, 6))
    d_beta = np.zeros((2, 6))
    d_gamma[1, 4] = -3.0  # the sign does not matter: |difference|
    d_beta[0, 2] = 2.0
    d_gamma[0, 2] = 0.5  # smaller than dim 2's beta change: the max over gamma and beta counts
    d_beta[1, 0] = 1.0
    ln = LNDifference(["emb.ln", "L1.out_ln"], d_gamma, d_beta)
    assert ln.moved_dims(3) == [(4, 3.0), (2, 2.0), (0, 1.0)]
    assert [j for j, _ in ln.moved_dims()] == [4, 2, 0, 1, 3, 5]  # ties keep dim order
    assert all(isinstance(j, int) and isinstance(v, float) for j, v in ln.moved_dims())


def test_ln_difference_frame_is_one_row_per_norm_and_dim():
    d_gamma = np.arange(6, dtype=np.float64).reshape(2, 3)
    ln = LNDifference(["a", "b"], d_gamma, -d_gamma)
    frame = ln.to_frame()
    assert list(frame.columns) == ["norm", "dim", "d_gamma", "d_beta"]
    assert frame["norm"].tolist() == ["a", "a", "a", "b", "b", "b"]
    assert frame["dim"].tolist() == [0, 1, 2, 0, 1, 2]
    assert frame["d_gamma"].tolist() == [0, 1, 2, 3, 4, 5]
    assert frame["d_beta"].tolist() == [0, -1, -2, -3, -4, -5]
