"""AppTest of the Positional information page: every tab renders (lazy tabs, driven by the tab
key), a widget change per view, bad inputs show an error, and models without a position table
get an explanation instead of a crash. A small random BERT keeps the runs short; the variance lab
uses its own random models. Image and audio analyses: the patch grid of a ViT's position table, the
row / column probe, BEiT's and wav2vec2's notes, and the text-only tabs saying why not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend.engine.extraction import ExtractionSettings
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model
from ui.common import Selection

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 300
TINY_BERT = "random:bert:layers=2,width=64,heads=2,seed=0"
TABS = [
    "Position embeddings",
    "Position probe",
    "TUPE decomposition",
    "Variance lab (NoPE)",
    "Queries & keys",
]


def _page(model: str = TINY_BERT, tab: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model, settings=ExtractionSettings(max_length=32, sample_size=2000)
    )
    at.run()
    at.switch_page("pages/positional.py")
    if tab is not None:
        at.session_state["pos_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _open(at: AppTest, tab: str) -> AppTest:
    at.session_state["pos_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _titles(at: AppTest) -> list[str]:
    out = []
    for el in at.get("plotly_chart"):
        layout = json.loads(el.proto.spec)["layout"]
        out.append(layout.get("title", {}).get("text", ""))
    return out


def test_every_tab_renders():
    at = _page()
    assert [t.value for t in at.title] == ["Positional information"]
    expected = {
        "Position embeddings": "Cosine similarity of position embeddings",
        "Position probe": "Position probe accuracy",
        "TUPE decomposition": "Relative magnitude of the four terms",
        "Variance lab (NoPE)": "Causal: attention-output variance",
        "Queries & keys": "‖mean query‖",
    }
    for tab in TABS:
        _open(at, tab)
        assert not at.error, (tab, [e.value for e in at.error])
        titles = _titles(at)
        assert any(expected[tab] in t for t in titles), (tab, titles)
        assert any("What is this" in e.label for e in at.expander), tab


def test_tabs_seen_stay_rendered_and_unseen_ones_wait():
    """Only the open tab runs at first; a tab opened once keeps rendering while the user stays on
    the page (so coming back to it is instant in the browser); leaving the page, or a new corpus,
    starts again from the open tab only."""
    at = _page()
    first = _titles(at)
    assert not any("Position probe accuracy" in t for t in first), first
    _open(at, "Position probe")
    _open(at, "Position embeddings")
    titles = _titles(at)
    assert any("Position probe accuracy" in t for t in titles), titles
    assert any("Cosine similarity of position embeddings" in t for t in titles), titles
    assert not any("Relative magnitude of the four terms" in t for t in titles), titles
    at.switch_page("pages/overview.py")
    at.run()
    at.switch_page("pages/positional.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    titles = _titles(at)
    assert not any("Position probe accuracy" in t for t in titles), titles
    assert any("Cosine similarity of position embeddings" in t for t in titles), titles
    _open(at, "Position probe")
    _open(at, "Position embeddings")
    selection = at.session_state["isoscope_selection"]
    at.session_state["isoscope_selection"] = Selection(
        model_source=selection.model_source,
        corpus_kind="paste",
        corpus_text="One short text about positions.\nAnother text, a little longer than that.",
        settings=selection.settings,
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    titles = _titles(at)
    assert not any("Position probe accuracy" in t for t in titles), titles
    assert any("Cosine similarity of position embeddings" in t for t in titles), titles


def test_position_embedding_views_are_lazy():
    """Arriving draws the cosine and PCA views only; the extreme-dimension and LayerNorm views
    draw once opened, and keep following the positions slider."""
    at = _page()
    titles = _titles(at)
    assert any("Cosine similarity of position embeddings" in t for t in titles), titles
    assert any("PCA of position embeddings" in t for t in titles), titles
    assert not any("Extreme dimensions" in t or "Embedding LayerNorm" in t for t in titles)
    for view, title in (
        ("Extreme dimensions", "Extreme dimensions of the position vectors"),
        ("Embedding LayerNorm", "Embedding LayerNorm parameters"),
    ):
        at.session_state["pos_emb_view"] = view
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert any(title in t for t in _titles(at)), (view, _titles(at))
    at.slider(key="pos_emb_n").set_value(16).run()
    assert not at.exception, [e.value for e in at.exception]
    titles = _titles(at)
    assert any("Extreme dimensions" in t for t in titles) and any("Cosine" in t for t in titles)
    assert len(at.dataframe) >= 1  # the extreme dims vs outliers table


def test_probe_widgets_and_bad_max_position():
    at = _page(tab="Position probe")
    at.selectbox(key="pos_probe_state").set_value("2").run()
    assert any("at state 2" in t for t in _titles(at))
    at.number_input(key="pos_probe_maxpos").set_value(1).run()
    assert not at.exception
    assert any("max position must be between 2" in e.value for e in at.error)


def test_tupe_self_test_and_head_change():
    at = _page(tab="TUPE decomposition")
    metric = next(m for m in at.metric if m.label.startswith("Self-test"))
    assert float(metric.value) < 1e-5
    at.number_input(key="pos_tupe_head").set_value(1).run()
    assert any("head 1" in t for t in _titles(at))


def test_variance_lab_widgets_and_bad_heads():
    at = _page(tab="Variance lab (NoPE)")
    at.select_slider(key="pos_var_width").set_value(64)
    at.select_slider(key="pos_var_seq").set_value(64)
    at.slider(key="pos_var_layers").set_value(2).run()
    assert not at.exception and not at.error
    slopes = at.dataframe[0].value
    assert len(slopes) == 2
    assert -1.3 < slopes.iloc[0, 1] < -0.6  # layer 1, causal
    assert abs(slopes.iloc[0, 3]) < 0.1  # layer 1, bidirectional
    at.number_input(key="pos_var_heads").set_value(3).run()
    assert any("divisible" in e.value for e in at.error)


def test_queries_keys_metric_change():
    at = _page(tab="Queries & keys")
    at.selectbox(key="pos_qk_metric").set_value("entropy_norm").run()
    assert not at.exception
    assert any("attention entropy / log(#keys)" in t for t in _titles(at))


def test_queries_keys_on_a_grouped_query_rotary_model(tiny_llama_dir):
    """Tiny Llama (4 query heads, 2 key heads, RoPE): the rotation toggle, the kv group in the
    columns and the caption, and the rotary reference."""
    at = _page(model=str(tiny_llama_dir), tab="Queries & keys")
    assert not at.error, [e.value for e in at.error]
    assert any("rotary applied" in t for t in _titles(at))
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert heat["x"] == ["h0·kv0", "h1·kv0", "h2·kv1", "h3·kv1"]
    assert any("4 query heads share 2 key heads" in c.value for c in at.caption)
    assert any("2104.09864" in e.value for e in at.markdown)
    at.radio(key="pos_qk_rotation").set_value("before").run()
    assert not at.exception and not at.error
    assert any("rotary before" in t for t in _titles(at))


def test_models_without_a_position_table_explain_instead_of_failing():
    at = _page(model="random:gpt2-nope:layers=2,width=32,heads=2", tab="Position embeddings")
    assert any("no learned absolute position table" in i.value for i in at.info)
    _open(at, "TUPE decomposition")
    assert any("Not available" in i.value for i in at.info)


# ----------------------------------------------------------------------------- images and audio
@pytest.fixture(scope="module")
def media(tmp_path_factory):
    root = tmp_path_factory.mktemp("pos-media")
    return {
        "vit": str(save_image_model("vit", root / "vit")),
        "beit": str(save_image_model("beit", root / "beit")),
        "wav2vec2": str(save_audio_model(root / "w2v")),
        "images": str(image_folder(root / "imgs", 4)),
        "audio": str(audio_folder(root / "clips")),
    }


def _media_page(model: str, kind: str, folder: str, tab: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind=kind,
        corpus_text=folder,
        settings=ExtractionSettings(sample_size=1000),
    )
    at.run()
    at.switch_page("pages/positional.py")
    at.session_state["pos_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def test_vit_position_table_on_the_patch_grid(media):
    at = _media_page(media["vit"], "images", media["images"], "Position embeddings")
    assert any("4x4 patch rows" in c.value and "[CLS]" in c.value for c in at.caption)
    assert any("patch r2c2" in t for t in _titles(at))
    at.number_input(key="pos_grid_row").set_value(0).run()
    assert any("patch r0c2" in t for t in _titles(at))
    at.radio(key="pos_grid_mode").set_value("every patch").run()
    assert not at.exception
    assert any("tile (row, column)" in t for t in _titles(at))
    assert any("Dosovitskiy" in m.value for m in at.markdown)


def test_vit_row_and_column_probe(media):
    at = _media_page(media["vit"], "images", media["images"], "Position probe")
    assert any("Patch row / column probe" in t for t in _titles(at))
    frame = at.dataframe[0].value
    assert list(frame.columns[:3]) == ["state", "row_accuracy", "column_accuracy"]
    assert len(frame) == 3  # emb + 2 layers


def test_beit_has_no_table_and_says_what_it_uses(media):
    at = _media_page(media["beit"], "images", media["images"], "Position embeddings")
    assert any("relative position bias" in i.value for i in at.info)


@pytest.mark.parametrize("tab", ["TUPE decomposition", "Queries & keys"])
def test_text_only_tabs_say_why_not_for_images(media, tab):
    at = _media_page(media["vit"], "images", media["images"], tab)
    assert any("does not apply" in i.value and "images" in i.value for i in at.info)


def test_audio_says_what_applies(media):
    at = _media_page(media["wav2vec2"], "audio", media["audio"], "Position embeddings")
    assert any("convolutional relative position embedding" in i.value for i in at.info)
    at = _media_page(media["wav2vec2"], "audio", media["audio"], "TUPE decomposition")
    assert any("does not apply" in i.value and "audio" in i.value for i in at.info)


def test_audio_probe_reads_the_frame_index(media):
    """Luo's probe applies to audio as it is: a frame's position is its index in the clip."""
    at = _media_page(media["wav2vec2"], "audio", media["audio"], "Position probe")
    assert any("Position probe accuracy" in t for t in _titles(at))


def test_whisper_table_of_frames_gets_the_table_views(media, tmp_path):
    """Whisper's encoder adds a fixed sinusoidal table of frames: cosine & PCA and the extreme
    dims are drawn from it, with a line saying what a position is."""
    from tests.media_models import save_whisper

    whisper = str(save_whisper(tmp_path / "whisper"))
    at = _media_page(whisper, "audio", media["audio"], "Position embeddings")
    assert any("fixed sinusoids" in c.value and "20 ms frame" in c.value for c in at.caption)
    charts = [el.proto.id for el in at.get("plotly_chart")]
    assert any("pos_emb_cos_chart" in key for key in charts), charts
