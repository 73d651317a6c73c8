"""``isoscope prewarm`` fills the disk cache under the key the dashboard looks up, so a first
visitor's extraction is a disk read."""

from __future__ import annotations

import pytest

from isoscope.cli import main
from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.inputs.corpus import bundled_corpus
from isoscope.engine.load.models import load_model
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.entries import cache_key


@pytest.mark.parametrize("fixture", ["tiny_bert_dir", "tiny_gpt2_dir"])
def test_prewarm_writes_the_dashboards_default_entry(request, tmp_path, capsys, fixture):
    folder = request.getfixturevalue(fixture)
    cache_dir = tmp_path / "cache"
    assert main(["prewarm", "--model", str(folder), "--cache-dir", str(cache_dir)]) == 0
    assert "ready in the cache" in capsys.readouterr().err
    loaded = load_model(str(folder))
    # the sidebar's defaults: first position excluded on causal models only
    settings = ExtractionSettings(exclude_first=loaded.info.is_causal)
    key = cache_key(loaded.fingerprint, bundled_corpus().sha, settings)
    hit = ResultCache(cache_dir).load(key)
    assert hit is not None and hit.settings.exclude_first == loaded.info.is_causal


def test_prewarm_refuses_an_empty_list(capsys):
    assert main(["prewarm", "--models", " , "]) == 2
    assert capsys.readouterr().err.startswith("error: --prewarm/--model needs")
