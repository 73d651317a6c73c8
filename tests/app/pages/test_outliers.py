"""AppTest of the Outlier dimensions page: default run, colour / threshold / state / text changes,
no expensive recomputation on a colour change, and a bad sidebar input."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 240  # the first run extracts the bundled MiniLM on the bundled corpus (~10-30 s)


def _page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/outliers.py").run()
    assert not at.exception
    return at


def _counts(at: AppTest) -> dict[str, int]:
    return {m.label: int(m.value.split()[0]) for m in at.metric}


def test_default_run_shows_heatmap_tables_and_minilm_dim_223():
    at = _page()
    assert [t.value for t in at.title] == ["Outlier dimensions"]
    assert not at.error
    assert "dimension **223**" in at.info[0].value
    assert at.radio(key="out_stat").value == "mean"
    assert at.select_slider(key="out_state").value == "3"
    counts = _counts(at)
    assert set(counts) == {"extreme index", "z-score", "quantile", "variance"}
    assert counts["extreme index"] >= 1 and counts["z-score"] >= 1
    table = at.dataframe[0].value
    assert 223 in table["dim"].tolist()
    row = table.set_index("dim").loc[223]
    assert row["mean"] < -1 and row["by z-score"] and row["by extreme index"]
    # The dimension view defaults to the strongest outlier of the chosen state.
    assert at.number_input(key="out_dim_3").value == 223
    split = at.dataframe[1].value.set_index("token type")
    assert {"position 0", "other"} <= set(split.index)
    # lazy views: the dimension view is open, the text view waits until opened
    assert len(at.get("plotly_chart")) == 2
    at.session_state["out_view"] = "One text, token by token"
    at.run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 3


def test_colour_threshold_state_and_text_changes(monkeypatch):
    at = _page()
    before = _counts(at)

    # A colour change must not recompute anything expensive: outliers, per-text encoding, extraction.
    def boom(*args, **kwargs):
        raise AssertionError("recomputed on a colour change")

    with monkeypatch.context() as patched:
        patched.setattr("isoscope.analysis.outliers.criteria_by_state", boom)
        patched.setattr("isoscope.engine.extraction.encode_text", boom)
        patched.setattr("isoscope.engine.extraction.extract", boom)
        for stat in ("|mean|", "variance", "argmin share", "argmax share"):
            at.radio(key="out_stat").set_value(stat).run()
            assert not at.exception, stat

    at.slider(key="out_thr_z").set_value(1.5).run()
    assert not at.exception
    assert _counts(at)["z-score"] > before["z-score"]
    at.slider(key="out_thr_extreme").set_value(1.0).run()
    assert not at.exception and _counts(at)["extreme index"] == 0

    at.select_slider(key="out_state").set_value("emb").run()
    assert not at.exception
    at.session_state["out_view"] = "One text, token by token"
    at.run()
    at.number_input(key="out_text").set_value(7).run()
    assert not at.exception
    at.number_input(key="out_dim_0").set_value(5).run()
    assert not at.exception and not at.error


def test_empty_pasted_text_shows_an_error_on_this_page():
    at = _page()
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input("")
    next(b for b in at.button if b.label == "Run analysis").click().run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Outlier dimensions"]
    assert any("pasted text is empty" in e.value for e in at.error)


def test_a_tiny_random_model_with_pasted_text_works():
    at = _page()
    at.selectbox(key="sb_model_preset").set_value("random GPT-2 (4 layers, 256)")
    at.radio(key="sb_corpus_kind").set_value("paste text").run()
    at.text_area(key="sb_corpus_text").input(
        "One short text.\nAnother, with a comma.\nA third one!"
    )
    next(b for b in at.button if b.label == "Run analysis").click().run()
    assert not at.exception and not at.error
    assert at.select_slider(key="out_state").options == ["emb", "1", "2", "3", "4"]
