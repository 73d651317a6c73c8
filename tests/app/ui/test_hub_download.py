"""AppTest: a Hub id typed in the sidebar downloads from the stand-in Hub, and the Overview's
model card names the commit loaded; a missing repo is one clear error."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")


def _analyse(at: AppTest, source: str) -> None:
    at.text_input(key="sb_model_custom").input(source).run()
    next(b for b in at.button if b.label == "Run analysis").click().run()
    assert not at.exception


def test_a_typed_hub_id_downloads_then_shows_the_overview(standin_hub, tiny_bert_dir):
    sha = standin_hub.add_folder("org/tiny-bert", tiny_bert_dir)
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    _analyse(at, "org/missing")
    assert any("no Hub repo 'org/missing'" in e.value for e in at.error)
    _analyse(at, "org/tiny-bert")
    assert not at.error
    assert len(standin_hub.downloads("model.safetensors")) == 1
    cells = [str(v) for table in at.table for v in table.value.to_numpy().ravel()]
    assert sha in cells  # the model card's "Hub revision"
