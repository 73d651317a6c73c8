"""AppTest of the "Massive activations & sinks" page for image and speech models
(ui/views/massive/media.py): each tab of a tiny random DINOv2-with-registers renders its chart
(carriers, norm distribution, the image with its patch norms), widgets rerun; an audio model gets
its carriers and frame norms under the waveform."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.ui.frame.selection import Selection
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model

APP = str(Path(__file__).resolve().parents[4] / "app.py")
TIMEOUT = 300


# ----------------------------------------------------------------------------- image models
@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("massive-images")
    return {
        "dinov2": str(save_image_model("dinov2-reg", root / "model")),
        "images": str(image_folder(root / "imgs", 4)),
        "wav2vec2": str(save_audio_model(root / "w2v")),
        "audio": str(audio_folder(root / "clips")),
    }


def _media_page(model: str, kind: str, folder: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model, corpus_kind=kind, corpus_text=folder
    )
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    at.switch_page("pages/massive.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _chart_keys(at: AppTest) -> list[str]:
    return [el.proto.id for el in at.get("plotly_chart")]


@pytest.mark.parametrize(
    ("tab", "chart"),
    [
        ("Massive activations", "massive_img_layers_chart"),
        ("High-norm tokens", "massive_img_hist_chart"),
        ("On the image", "massive_img_overlay_chart"),
    ],
)
def test_image_model_gets_carriers_norms_and_the_image(image_run, tab, chart):
    at = _media_page(image_run["dinov2"], "images", image_run["images"], massive_img_tab=tab)
    assert any(chart in key for key in _chart_keys(at)), _chart_keys(at)
    assert any("Darcet" in m.value for m in at.markdown)
    if tab == "Massive activations":
        assert "at register" in at.dataframe[0].value.columns
    if tab == "On the image":
        assert any("Prefix tokens" in c.value and "[REG4]" in c.value for c in at.caption)
        at.selectbox(key="massive_img_index").set_value(1).run()
        at.number_input(key="massive_img_factor").set_value(1.2).run()
        assert not at.exception and not at.error


# ----------------------------------------------------------------------------- speech encoders
@pytest.mark.parametrize(
    ("tab", "chart"),
    [
        ("Massive activations", "massive_audio_layers_chart"),
        ("On the clip", "massive_audio_clip_chart"),
    ],
)
def test_audio_model_gets_carriers_and_frame_norms_under_the_waveform(image_run, tab, chart):
    at = _media_page(image_run["wav2vec2"], "audio", image_run["audio"], massive_audio_tab=tab)
    assert any(chart in key for key in _chart_keys(at)), _chart_keys(at)
    if tab == "Massive activations":
        assert "at first frame" in at.dataframe[0].value.columns
    else:
        at.selectbox(key="massive_audio_clip").set_value(1).run()
        at.number_input(key="massive_audio_factor").set_value(1.5).run()
        assert not at.exception and not at.error


def test_whisper_frames_past_a_clip_are_said_to_be_left_out(image_run, tmp_path):
    from tests.media_models import save_whisper

    whisper = str(save_whisper(tmp_path / "whisper"))
    at = _media_page(whisper, "audio", image_run["audio"], massive_audio_tab="High-norm frames")
    assert any("Radford" in m.value and "padding" in m.value for m in at.markdown)
    frame = at.dataframe[0].value
    assert "high-norm frames" in frame.columns and len(frame) == 3  # emb, 1, 2
