"""Which sites the SmoothQuant mappings cover, and the one reason for each site they do not
(synthetic site maps; the second zoo's test runs it on real wiring)."""

from __future__ import annotations

import pytest

from isoscope.analysis.quant.coverage import NO_NORM, UNTRACED, site_coverage
from isoscope.analysis.quant.mappings import Mapping, Skipped
from isoscope.analysis.quant.sites import Site, SiteMap

pytestmark = pytest.mark.unit


def _site(layer, role, modules, norm=None, traced=True):
    return Site(layer, role, modules, modules, 64, norm is not None, norm, traced)


SITES = SiteMap(
    sites=(
        _site(1, "attn_in", ("l.0.q", "l.0.k", "l.0.v"), norm="l.0.ln1"),
        _site(1, "mlp_in", ("l.0.up",), norm="l.0.ln2"),
        _site(1, "attn_out", ("l.0.o",)),
        _site(2, "attn_in", ("l.1.in_proj",), norm="l.1.ln1"),
        _site(2, "internal", ("l.1.dt_proj",), traced=False),
    ),
    blocks_path="l",
    num_layers=2,
)


def test_each_site_is_smoothed_by_its_norm_or_says_why_not():
    mappings = [
        Mapping(1, "attn_in", "l.0.ln1", ("l.0.q", "l.0.k", "l.0.v")),
        Mapping(1, "mlp_in", "l.0.ln2", ("l.0.up",)),
    ]
    skipped = [Skipped(2, "l.1.ln1", "its output also feeds a gate")]
    rows = site_coverage(SITES, mappings, skipped)
    assert [r.get("smoothed_by") for r in rows[:2]] == ["l.0.ln1", "l.0.ln2"]
    assert rows[2]["not_smoothed"] == NO_NORM
    assert (
        rows[3]["not_smoothed"] == "its norm l.1.ln1 is not smoothed: its output also feeds a gate"
    )
    assert rows[4]["not_smoothed"] == UNTRACED
    assert all(("smoothed_by" in r) != ("not_smoothed" in r) for r in rows)


def test_a_site_only_partly_covered_is_not_called_smoothed():
    """A norm mapped to q and k only leaves v unsmoothed: the whole site says why."""
    rows = site_coverage(SITES, [Mapping(1, "attn_in", "l.0.ln1", ("l.0.q", "l.0.k"))], [])
    assert "smoothed_by" not in rows[0]
    assert rows[0]["not_smoothed"].startswith("its norm l.0.ln1 is not smoothed")


def test_the_recipes_general_note_is_the_reason_when_it_wrote_no_mapping():
    rows = site_coverage(SITES, [], [], notes=("the model has no norm -> linear pair",))
    assert rows[1]["not_smoothed"] == (
        "its norm l.0.ln2 is not smoothed: the model has no norm -> linear pair"
    )
