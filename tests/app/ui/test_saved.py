"""AppTest: a saved analysis opened from the sidebar drives every page without the model.

The analysis is saved from a tiny checkpoint that is then deleted, so any page that tried to
load the model would fail: statistics and sample views must render from the file, and views
that need the model must say so instead of raising. With the checkpoint present, such a view
loads it (same fingerprint) and works.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.corpus import Corpus, bundled_corpus
from isoscope.engine.load.models import load_model
from isoscope.engine.store.saved import save_analysis
from tests.app.charts import charts

ROOT = Path(__file__).resolve().parents[3]
APP = str(ROOT / "app.py")
TIMEOUT = 300
PAGES = [
    "overview",
    "outliers",
    "anisotropy",
    "projections",
    "similarity",
    "layernorm",
    "positional",
    "compare",
    "tour",
]


def _save(checkpoint: Path, target: Path) -> tuple[Path, object]:
    loaded = load_model(str(checkpoint), device="cpu")
    corpus = Corpus(bundled_corpus().texts[:40], "forty sentences")
    result = extract(loaded, corpus, ExtractionSettings(max_length=32, sample_size=300))
    return save_analysis(result, target), result


@pytest.fixture(scope="module")
def gone_model_run(tmp_path_factory, tiny_bert_dir):
    """A saved analysis whose checkpoint no longer exists anywhere."""
    folder = tmp_path_factory.mktemp("saved-gone")
    checkpoint = folder / "tiny-bert-deleted"
    shutil.copytree(tiny_bert_dir, checkpoint)
    path, result = _save(checkpoint, folder / "run.isoscope")
    shutil.rmtree(checkpoint)
    return path, result


def _open(at: AppTest, path: Path) -> AppTest:
    at.run()
    at.text_input(key="saved_path").set_value(str(path))
    at.button(key="saved_open").click().run()
    assert not at.exception, at.exception
    return at


def _texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for e in at.error] + [i.value for i in at.info]
    parts += [s.value for s in at.success] + [w.value for w in at.warning]
    return "\n".join(str(p) for p in parts)


def test_every_page_renders_from_a_saved_analysis_without_the_model(gone_model_run):
    path, result = gone_model_run
    at = _open(AppTest.from_file(APP, default_timeout=TIMEOUT), path)
    assert any("run.isoscope" in s.value for s in at.success)  # the sidebar says what is shown
    needs_model, drawn = [], {}
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        text = _texts(at)
        assert "Cannot analyse this selection" not in text, page
        drawn[page] = len(charts(at))
        if "needs the model itself" in text:
            needs_model.append(page)
    # statistics and sample views draw from the file; views of weights or new texts say they
    # need the model (a page may also mention it for one of its sections)
    for page in ("overview", "outliers", "anisotropy", "projections"):
        assert drawn[page] >= 1, (page, drawn)
    assert {"similarity", "layernorm", "positional"} <= set(needs_model), needs_model
    at.switch_page("pages/overview.py").run()
    assert str(result.num_tokens) in _texts(at).replace(",", "")


def test_a_view_that_needs_the_model_loads_it_when_it_is_here(tmp_path, tiny_bert_dir):
    path, _ = _save(tiny_bert_dir, tmp_path / "run.isoscope")
    at = _open(AppTest.from_file(APP, default_timeout=TIMEOUT), path)
    at.switch_page("pages/layernorm.py").run()
    assert not at.exception, at.exception
    text = _texts(at)
    assert "needs the model itself" in text and "cannot be loaded" not in text
    assert len(charts(at)) >= 1


def test_close_and_bad_files(tmp_path, gone_model_run):
    path, _ = gone_model_run
    at = _open(AppTest.from_file(APP, default_timeout=TIMEOUT), path)
    at.button(key="saved_close").click().run()
    assert not at.exception
    assert not any("Showing" in s.value for s in at.success)
    bad = tmp_path / "bad.isoscope"
    bad.write_bytes(b"not a zip at all")
    at.text_input(key="saved_path").set_value(str(bad))
    at.button(key="saved_open").click().run()
    assert not at.exception
    assert any("Cannot open this saved analysis" in e.value for e in at.error)


def test_a_saved_image_analysis_on_compare_asks_for_its_folder(tmp_path):
    """A saved image analysis names its images by path only: Compare's model B says to choose
    their folder (the sidebar's corpus is text here), instead of reading the paths as text."""
    from isoscope.engine.inputs.media import load_media_folder
    from tests.media_models import image_folder, save_image_model

    checkpoint = save_image_model("vit", tmp_path / "vit")
    images = load_media_folder(image_folder(tmp_path / "imgs", 2), "image")
    loaded = load_model(str(checkpoint), device="cpu")
    result = extract(loaded, images, ExtractionSettings(sample_size=30))
    path = save_analysis(result, tmp_path / "imgs.isoscope")
    at = _open(AppTest.from_file(APP, default_timeout=TIMEOUT), path)
    at.switch_page("pages/compare.py").run()
    assert not at.exception, at.exception
    assert "keeps only the names of its images" in _texts(at)
