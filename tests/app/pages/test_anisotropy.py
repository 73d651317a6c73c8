"""AppTest of the Anisotropy page: default run, layer / post-processing changes, the random-init
comparison, and bad clip dims."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.app.charts import charts

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = (
    300  # the first run extracts the bundled MiniLM (and, for the comparison, its random-init copy)
)


def _page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/anisotropy.py").run()
    assert not at.exception
    return at


def _charts(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page, by widget key suffix, as dicts."""
    return {c.id: c.figure for c in charts(at)}


def _trace_names(fig: dict) -> set[str]:
    return {t.get("name") for t in fig["data"]}


def test_default_run_shows_every_chart():
    at = _page()
    assert [t.value for t in at.title] == ["Anisotropy"]
    assert not at.error
    assert at.selectbox(key="aniso_post").value == "clip"
    assert at.select_slider(key="aniso_layer").value == "3"
    assert any("each state's detected outlier dims" in c.value for c in at.caption)
    figures = list(_charts(at).values())
    assert len(figures) == 4
    histogram, lines, contributions, contrast = figures
    assert sorted(n.split(" (")[0] for n in _trace_names(histogram)) == ["processed", "raw"]
    assert any("(mean 0.1" in n for n in _trace_names(histogram))
    assert "hidden state 3" in histogram["layout"]["title"]["text"]
    assert {"raw", "processed"} <= _trace_names(lines)
    assert "dim 223" in _trace_names(contributions)  # MiniLM's rogue dimension carries the cosine
    assert any("drops from" in m.value for m in at.main.markdown)


def test_layer_and_post_processing_changes():
    at = _page()
    at.select_slider(key="aniso_layer").set_value("emb").run()
    assert not at.exception and not at.error
    histogram = list(_charts(at).values())[0]
    assert "hidden state emb" in histogram["layout"]["title"]["text"]
    at.selectbox(key="aniso_post").set_value("standardize").run()
    assert not at.exception and not at.error
    assert any("standardisation" in c.value for c in at.caption)
    at.radio(key="aniso_hist_view").set_value("all hidden states").run()
    assert not at.exception
    small_multiples = list(_charts(at).values())[0]
    assert len(small_multiples["data"]) == 2 * 7  # raw + processed for each hidden state


def test_random_init_comparison():
    at = _page()
    at.toggle(key="aniso_random").set_value(True).run()
    assert not at.exception and not at.error
    lines = list(_charts(at).values())[1]
    assert "random init" in _trace_names(lines)
    assert any("Trained vs random init" in c.value for c in at.caption)


def test_bad_clip_dims_show_an_error():
    at = _page()
    at.text_input(key="aniso_clip_dims").input("223, x").run()
    assert not at.exception
    assert any("not an integer" in e.value for e in at.error)
    at.text_input(key="aniso_clip_dims").input("9999").run()
    assert any("out of range" in e.value for e in at.error)
    at.text_input(key="aniso_clip_dims").input("223").run()
    assert not at.error


def test_all_but_the_top_range_is_the_shared_one(monkeypatch):
    """One post-processing control group for Anisotropy and Clipping & projections: the range of
    D (components removed) is 1 .. d-1 with default round(d/100) on both pages (it had drifted)."""
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")  # the projections page would compile UMAP
    at = _page()
    at.selectbox(key="aniso_post").set_value("abtt").run()
    assert not at.exception and not at.error
    field = at.number_input(key="aniso_abtt_d")
    assert (field.min, field.max, field.value) == (1, 383, 4)  # MiniLM: d = 384
    at.switch_page("pages/projections.py").run()
    at.selectbox(key="proj_post").set_value("abtt").run()
    assert not at.exception
    field = at.number_input(key="proj_abtt_d")
    assert (field.min, field.max, field.value) == (1, 383, 4)


# ----------------------------------------------------------------------------- an image analysis
def test_image_analysis_with_the_random_init_contrast(tmp_path_factory):
    """Godey et al.'s trained vs random-init contrast on a tiny random ViT over an image folder."""
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.ui.frame.selection import Selection
    from tests.media_models import image_folder, save_image_model

    root = tmp_path_factory.mktemp("aniso-images")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["isoscope_selection"] = Selection(
        model_source=str(save_image_model("vit", root / "vit")),
        corpus_kind="images",
        corpus_text=str(image_folder(root / "imgs", 4)),
        settings=ExtractionSettings(sample_size=1000),
    )
    at.run()
    at.switch_page("pages/anisotropy.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.select_slider(key="aniso_layer").options == ["emb", "1", "2"]
    histogram = list(_charts(at).values())[0]
    assert "hidden state" in histogram["layout"]["title"]["text"]
    at.toggle(key="aniso_random").set_value(True).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "random init" in _trace_names(list(_charts(at).values())[1])
