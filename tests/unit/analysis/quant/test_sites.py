"""The quantization sites' rules on planted inputs: routed experts vs per-layer adapters, and the
roles of a block read from its mixers."""

from __future__ import annotations

import torch

from isoscope.analysis.quant.sites import _mixer_roles, _routed


def test_a_list_is_routed_experts_only_when_one_pass_runs_two_members():
    """(block, path, rows): the block's projections see 8 rows; routed experts fewer."""
    lists = {
        "layers.1.moe.experts": {1},
        "layers.1.ff.adapters": {1, 3},
        "layers.2.ffn": {2},
    }
    calls = [
        (1, "layers.1.attn.q", 8),
        (1, "layers.1.moe.experts.0.up", 3),
        (1, "layers.1.moe.experts.2.up", 5),  # two experts in one block's pass: routed
        (1, "layers.1.ff.adapters.0.0", 8),
        (3, "layers.1.ff.adapters.1.0", 8),  # one adapter per use of a shared block
        (2, "layers.2.attn.q", 8),
        (2, "layers.2.ffn.0.up", 8),
        (2, "layers.2.ffn.1.up", 8),  # stacked blocks that all see every token: not experts
    ]
    assert _routed(lists, calls) == {"layers.1.moe.experts"}


def test_roles_follow_the_mixers():
    in_proj, x_proj, out_proj, up, down = (torch.nn.Linear(2, 2) for _ in range(5))
    mixer = {in_proj, x_proj, out_proj}
    modules = [[in_proj], [x_proj], [out_proj], [up], [down]]
    fed = [True, False, False, True, False]
    assert _mixer_roles(modules, fed, [mixer]) == [
        "attn_in",
        "other",  # a mixer's internal projection (Mamba's x_proj)
        "attn_out",
        "mlp_in",
        "mlp_out",
    ]
    # a block with no mixer (Nemotron-H's MLP-only layer)
    assert _mixer_roles([[up], [down]], [True, False], []) == ["mlp_in", "mlp_out"]
