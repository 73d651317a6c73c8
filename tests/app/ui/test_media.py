"""AppTest per modality: an image folder and an audio folder through the sidebar's selection on the
Overview, Outliers and Projections pages; views that need text say so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 240


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("app-images")
    return str(save_image_model("dinov2-reg", root / "model")), str(image_folder(root / "imgs", 4))


@pytest.fixture(scope="module")
def audio_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("app-audio")
    return str(save_audio_model(root / "model")), str(audio_folder(root / "clips"))


def _page(page: str, model: str, kind: str, folder: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind=kind,
        corpus_text=folder,
        settings=ExtractionSettings(sample_size=1000),
    )
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    return " ".join(parts + [i.value for i in at.info] + [str(t.value) for t in at.table])


@pytest.mark.parametrize("page", ["pages/overview.py", "pages/outliers.py"])
def test_image_folder_on_the_main_pages(image_run, page):
    at = _page(page, *image_run[:1], "images", image_run[1])
    assert not at.error, [e.value for e in at.error]


def test_image_projection_colours_by_patch_row(image_run):
    at = _page("pages/projections.py", image_run[0], "images", image_run[1])
    colour = at.selectbox(key="proj_colour_token sample")
    assert "patch_row" in colour.options or "patch row" in " ".join(colour.options)
    colour.set_value("patch_row").run()
    assert not at.exception and not at.error
    assert at.radio(key="proj_data").options == ["token sample"]


def test_image_analysis_on_a_text_view_says_why_not(image_run):
    at = _page("pages/similarity.py", image_run[0], "images", image_run[1])
    assert any("does not apply" in i.value for i in at.info)


@pytest.mark.parametrize("page", ["pages/overview.py", "pages/outliers.py"])
def test_audio_folder_on_the_main_pages(audio_run, page):
    at = _page(page, audio_run[0], "audio", audio_run[1])
    assert not at.error, [e.value for e in at.error]


def test_audio_projection_colours_by_time(audio_run):
    at = _page("pages/projections.py", audio_run[0], "audio", audio_run[1])
    at.selectbox(key="proj_colour_token sample").set_value("time").run()
    assert not at.exception and not at.error


def test_sidebar_offers_the_folders():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    corpus = at.sidebar.radio(key="sb_corpus_kind")
    assert "image folder" in corpus.options and "audio folder" in corpus.options
    corpus.set_value("image folder").run()
    assert at.sidebar.text_input(key="sb_images_folder").value == ""


def test_image_compare_against_the_random_init_copy(image_run):
    """Compare on an image folder: A against its random-init copy by default, CKA on the same
    patches; STS and the two-corpora mode say why they do not apply."""
    at = _page("pages/compare.py", image_run[0], "images", image_run[1])
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="cmp_model_b").value.startswith("random-init copy of A")
    assert "same" in _text(at) and "sampled tokens" in _text(at)  # the token basis
    assert "STS by state does not apply" in _text(at)
    at.radio(key="cmp_mode").set_value(at.radio(key="cmp_mode").options[1]).run()
    assert not at.exception and "Two corpora are compared for text only" in _text(at)


@pytest.mark.parametrize("which", ["image", "audio"])
def test_layernorm_ablation_on_media_reports_the_final_state_cosine(image_run, audio_run, which):
    model, folder = image_run if which == "image" else audio_run
    at = _page("pages/layernorm.py", model, "images" if which == "image" else "audio", folder)
    assert not at.error, [e.value for e in at.error]
    assert "final-state cosine" in _text(at)  # instead of the STS checkbox
    at.radio(key="ln_dims_mode").set_value("typed")
    at.text_input(key="ln_dims_text").set_value("0, 1")
    at.slider(key="ln_controls").set_value(1)
    at.button(key="ln_ablation_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("final-state cosine" in m.label for m in at.metric)


def test_image_overview_builds_the_full_report(image_run):
    """The Overview's full findings for an image analysis: the sections that apply, and the one
    line of what is left out (sentence similarity needs text)."""
    at = _page("pages/overview.py", image_run[0], "images", image_run[1])
    at.button(key="overview_full_findings").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Sentence similarity: left out, does not apply" in _text(at)


def test_image_compare_with_a_model_that_cuts_other_tokens(image_run, tmp_path):
    """DINOv2 with registers (A) against a ViT (B, typed): no shared token sample, so CKA pools
    one vector per image, from the sidebar's images."""
    vit = str(save_image_model("vit", tmp_path / "vit"))
    at = _page("pages/compare.py", image_run[0], "images", image_run[1])
    model_b = at.selectbox(key="cmp_model_b")
    model_b.set_value(next(o for o in model_b.options if "local folder" in o)).run()
    at.text_input(key="cmp_model_b_custom").input(vit).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "mean-pooled item vectors" in _text(at)


def test_audio_compare_against_the_random_init_copy(audio_run):
    at = _page("pages/compare.py", audio_run[0], "audio", audio_run[1])
    assert not at.error, [e.value for e in at.error]
    assert "STS by state does not apply" in _text(at) and "audio clips" in _text(at)


def test_image_projection_carries_patch_thumbnails(image_run):
    """The live chart gets each patch point's thumbnail once (layout.meta) and a caption says how
    many points have one."""
    from tests.app.charts import charts

    at = _page("pages/projections.py", image_run[0], "images", image_run[1])
    figure = next(c.figure for c in charts(at) if c.key == "proj_chart")
    thumbnails = figure["layout"]["meta"]["thumbnails"]
    assert thumbnails and all(t.startswith("data:image/png;base64,") for t in thumbnails)
    mapped = {
        k for tr in figure["data"] for k in tr.get("meta", {}).get("thumbnail_of", {}).values()
    }
    assert mapped == set(range(len(thumbnails)))
    assert any("Hover a patch point" in c.value for c in at.caption)
