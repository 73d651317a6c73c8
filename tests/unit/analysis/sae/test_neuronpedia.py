"""Neuronpedia pages of known releases, built from the small table of what cannot be read from
an SAE's files."""

from __future__ import annotations

import pytest

from isoscope.analysis.sae.neuronpedia import feature_url


@pytest.mark.parametrize(
    "source,expected",
    [
        ("google/gemma-scope-2-270m-pt/resid_post/layer_12_width_16k_l0_medium",
         "https://www.neuronpedia.org/gemma-3-270m/12-gemmascope-2-res-16k/5"),
        ("google/gemma-scope-2-1b-it/resid_post/layer_13_width_262k_l0_medium",
         "https://www.neuronpedia.org/gemma-3-1b-it/13-gemmascope-2-res-262k/5"),
        ("google/gemma-scope-2b-pt-res/layer_20/width_16k/average_l0_71",
         "https://www.neuronpedia.org/gemma-2-2b/20-gemmascope-res-16k/5"),
        ("google/gemma-scope-2-270m-pt@main/resid_post/layer_12_width_16k_l0_medium",
         "https://www.neuronpedia.org/gemma-3-270m/12-gemmascope-2-res-16k/5"),
        ("google/gemma-scope-2-270m-pt/resid_post/layer_12_width_16k_l0_small", None),
        ("google/gemma-scope-2-270m-pt/mlp_out/layer_12_width_16k_l0_medium", None),
        ("/local/folder", None),
    ],
)  # fmt: skip
def test_neuronpedia_links_for_known_releases_only(source, expected):
    assert feature_url(source, 5) == expected
