"""The shared post-processing controls' helpers: the choice's label and options, and the range of
all-but-the-top's D."""

from __future__ import annotations

import pytest

from isoscope.ui.widgets.controls import AUTO, PostChoice, abtt_range


def test_post_choice_options_labels_and_hashing():
    clip = PostChoice("clip", (("dims", (3, 7)),))
    assert clip.options == {"dims": (3, 7)} and clip.label == "clipped dims 3, 7"
    assert PostChoice("clip", (("dims", ()),)).label == "clipped dims (none)"
    assert (
        PostChoice("clip", (("dims", AUTO),)).label == "clipped: each state's detected outlier dims"
    )
    assert hash(clip) == hash(PostChoice("clip", (("dims", (3, 7)),)))  # a cache key
    assert clip != PostChoice("clip", (("dims", (7, 3)),))
    from isoscope.analysis.projections.postprocess import POSTPROCESSORS

    assert PostChoice("abtt", (("n_components", 3),)).label == POSTPROCESSORS["abtt"].label


@pytest.mark.parametrize(
    ("d", "expected"),
    [(768, (1, 767, 8)), (384, (1, 383, 4)), (32, (1, 31, 1)), (2, (1, 1, 1)), (1, (1, 1, 1))],
)
def test_abtt_range_is_at_least_one_and_below_d_with_d_over_100_by_default(d, expected):
    assert abtt_range(d) == expected
