"""The token x channel view: max pooling keeps the site's largest |x| (the one the scan measured)."""

from __future__ import annotations

import pytest

from isoscope.analysis.quant.readiness import scan_sites, site_magnitudes
from isoscope.engine.load.models import load_model
from tests.quant_checks import TEXTS, no_hooks


def test_tiles_keep_the_site_maximum(tiny_tied_llama_dir):
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    scan = scan_sites(loaded, TEXTS, max_length=32, error_tokens=8, end_tokens=16)
    site = scan.sites[0]
    tiles = site_magnitudes(loaded, TEXTS, site.site, max_length=32, max_rows=5, max_cols=3)
    assert no_hooks(loaded.model)
    assert tiles.n_tokens == scan.n_tokens and tiles.width == site.site.width
    assert tiles.tiles.shape[0] <= 5 and tiles.tiles.shape[1] <= 3
    assert float(tiles.tiles.max()) == pytest.approx(site.max_abs, rel=1e-5)
