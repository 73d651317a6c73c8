"""The ignore list's rule on planted per-block damage: blocks in damage order until the share,
at most the cap, never a block that does no damage."""

from __future__ import annotations

from isoscope.analysis.quant.ignore_list import kept_blocks


def test_kept_blocks_follow_the_damage_order_until_the_share():
    damage = {0: 1.0, 1: 6.0, 2: 0.5, 3: 2.5}  # shares 0.1, 0.6, 0.05, 0.25
    rows, kept = kept_blocks(damage, ignore_share=0.5, max_blocks=4)
    assert [r["layer"] for r in rows] == [1, 3, 0, 2]
    assert kept == [1]  # 60% alone reaches one half
    assert kept_blocks(damage, ignore_share=0.8, max_blocks=4)[1] == [1, 3]
    assert kept_blocks(damage, ignore_share=0.99, max_blocks=2)[1] == [1, 3]  # the cap
    assert kept_blocks(damage, ignore_share=0.0)[1] == []
    assert kept_blocks({0: 0.0, 1: 0.0}, ignore_share=0.5)[1] == []  # no damage: nothing kept
    assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-12
