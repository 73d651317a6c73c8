"""The layer-pattern sentence and the views' reading of a pattern, on hand-built patterns."""

from __future__ import annotations

from isoscope.engine.arch.mixers import (
    DELTANET,
    FULL,
    MAMBA2,
    LayerKinds,
    LayerPattern,
    Mixer,
    pattern_sentence,
)


def _layer(i: int, *kinds: str, parallel: bool = False, shared: bool = False) -> LayerKinds:
    return LayerKinds(
        i,
        tuple(Mixer(k, f"layers.{i - 1}.m{j}", shared=shared) for j, k in enumerate(kinds)),
        parallel,
    )


def test_counts_follow_first_appearance():
    kinds = [DELTANET, DELTANET, DELTANET, FULL] * 6
    pattern = LayerPattern(tuple(_layer(i + 1, k) for i, k in enumerate(kinds)))
    assert pattern_sentence(pattern) == "24 layers: 18 Gated DeltaNet, 6 full attention"
    assert pattern.attention_layers() == tuple(range(4, 25, 4))
    assert pattern.other_layers()[1] == DELTANET


def test_one_kind_parallel_shared_streams():
    parallel = LayerPattern(tuple(_layer(i, MAMBA2, FULL, parallel=True) for i in (1, 2)))
    assert pattern_sentence(parallel) == "2 layers: Mamba-2 + full attention in parallel"
    shared = LayerPattern(
        (_layer(1, MAMBA2), LayerKinds(2, (Mixer(FULL, "a", shared=True), Mixer(MAMBA2, "b"))))
    )
    assert pattern_sentence(shared) == "2 layers: 1 Mamba-2, 1 shared attention block + Mamba-2"
    altup = LayerPattern((_layer(1, FULL),), streams=4)
    assert pattern_sentence(altup) == "1 layer: full attention; AltUp x 4 streams"


def test_no_attention_reason():
    ssm = LayerPattern(tuple(_layer(i, MAMBA2) for i in (1, 2)))
    assert ssm.attention_layers() == ()
    assert ssm.no_attention_reason() == "no attention layers: Mamba-2 mixers only"
    mlp = LayerPattern((LayerKinds(1, ()),))
    assert mlp.other_layers() == {1: "MLP only"}
    assert LayerPattern((_layer(1, FULL),)).no_attention_reason() is None


def test_offloaded_weights_are_not_taken_for_a_shared_block():
    """Weights on the meta device (accelerate's disk offload) all report storage 0; two blocks
    holding such weights do not share them."""
    from collections import Counter

    import torch

    from isoscope.engine.arch.mixers import _shared, _storage

    blocks = [torch.nn.Linear(4, 4, device="meta") for _ in range(2)]
    uses: Counter = Counter()
    for block in blocks:
        uses.update({_storage(p) for p in block.parameters()} - {None})
    assert not _shared(blocks[0], uses)
    one = torch.nn.Linear(4, 4)
    assert _shared(one, Counter({_storage(one.weight): 2}))
