"""The queries/keys statistics on planted sums: grouped-query pairing (query head h against key
head h // (H / G)), the entropy normalisation, and the figure naming each query head's key head."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from isoscope.analysis.positional.qk import _finish, _Sums
from isoscope.plots.positional import qk_heatmaps


def _loaded():
    config = SimpleNamespace(sliding_window=None)
    info = SimpleNamespace(is_causal=True, architecture="X", display_name="x")
    return SimpleNamespace(model=SimpleNamespace(config=config), info=info)


def _stats(q: torch.Tensor, k: torch.Tensor):
    """q (1, H, T, d), k (1, G, T, d); uniform causal attention."""
    t = q.shape[2]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    weights = causal / causal.sum(-1, keepdim=True)
    weights = weights.double().expand(1, q.shape[1], t, t)
    sums = _Sums(1)
    sums.add(0, q, k, weights, causal[None, None], torch.ones(1, t, dtype=torch.bool))
    return _finish(sums, _loaded(), "", "before", "test")


def test_each_query_head_is_paired_with_its_own_key_head():
    heads, groups, t, d = 6, 2, 5, 4
    q = torch.zeros(1, heads, t, d, dtype=torch.float64)
    k = torch.zeros(1, groups, t, d, dtype=torch.float64)
    for h in range(heads):
        q[0, h, :, h // 3] = 2.0  # query head h points where key head h // 3 points
    for g in range(groups):
        k[0, g, :, g] = 1.0
    stats = _stats(q, k)
    assert stats.kv_head.tolist() == [0, 0, 0, 1, 1, 1]
    np.testing.assert_allclose(stats.cos_qk, 1.0)
    np.testing.assert_allclose(stats.mean_q_norm, 2.0)
    np.testing.assert_allclose(stats.mean_k_norm, 1.0)
    assert stats.settings()["num_kv_heads"] == 2


def test_uniform_causal_attention_has_entropy_log_keys():
    q = torch.randn(1, 2, 4, 3, dtype=torch.float64)
    stats = _stats(q, q.clone())
    np.testing.assert_allclose(stats.entropy, np.log(np.arange(1, 5)).mean())
    np.testing.assert_allclose(stats.entropy_norm, 1.0)  # the one-key first query is skipped
    assert stats.kv_head.tolist() == [0, 1] and stats.num_tokens == 4


def test_heatmap_names_the_key_head_only_under_grouped_query_attention():
    heads = 4
    grouped = _stats(torch.randn(1, heads, 3, 2).double(), torch.randn(1, 2, 3, 2).double())
    plain = _stats(torch.randn(1, heads, 3, 2).double(), torch.randn(1, heads, 3, 2).double())
    fig = qk_heatmaps([grouped, plain], "cos_qk", "cos")
    assert list(fig.data[0].x) == ["h0·kv0", "h1·kv0", "h2·kv1", "h3·kv1"]
    assert list(fig.data[1].x) == ["h0", "h1", "h2", "h3"]
    titles = [fig.layout.xaxis.title.text, fig.layout.xaxis2.title.text]
    assert titles == ["query head · its key head", "query head"]


def test_broadcast_key_heads_fold_back_to_their_groups():
    from isoscope.analysis.positional.qk import shared_key_heads

    k = torch.randn(2, 3, 5, 4)  # 3 key heads
    assert torch.equal(shared_key_heads(k.repeat_interleave(2, dim=1)), k)
    assert torch.equal(shared_key_heads(k), k)  # distinct heads stay
