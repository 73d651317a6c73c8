"""AppTest of the Sentence similarity page: default run, widget changes, bad uploads."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.app.conftest import shown

APP = str(Path(__file__).resolve().parents[3] / "app.py")


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page("pages/similarity.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_default_run_scores_the_bundled_examples():
    at = open_page()
    assert not at.error
    assert len(at.get("plotly_chart")) == 3  # STS, word senses, threshold sweep
    sts, wic = at.dataframe[0].value, at.dataframe[1].value
    assert list(sts["state"]) == ["emb", "1", "2", "3", "4", "5", "6"]
    assert {"raw", "clipped", "processed"} <= set(sts.columns)
    assert sts["raw"].iloc[-1] > sts["raw"].iloc[0]
    assert wic["raw_accuracy"].between(0, 1).all()


def test_widget_changes():
    at = open_page()
    at.selectbox(key="sim_sts_post").set_value("none").run()
    assert not at.exception
    assert "processed" not in at.dataframe[0].value.columns
    at.selectbox(key="sim_sts_clip_mode").set_value("typed").run()
    at.text_input(key="sim_sts_clip_dims").set_value("223").run()
    assert not at.exception and not at.error
    assert set(at.dataframe[0].value["clipped_dims"]) == {"223"}
    at.selectbox(key="sim_wic_sweep_state").set_value(2).run()
    assert not at.exception
    upload = (
        b"sentence1,sentence2,score\nA cat sat.,A cat sits.,5\nA dog ran.,It rained.,0\n"
        b"A man ate.,A man dined.,4\nBirds fly.,Fish swim.,1\n"
    )
    at.file_uploader(key="sim_sts_file").set_value(("mine.csv", upload, "text/csv")).run()
    assert not at.exception and not at.error
    assert any("4 pairs from mine.csv" in shown(c.value) for c in at.caption)


def test_bad_uploads_show_errors():
    at = open_page()
    at.file_uploader(key="sim_sts_file").set_value(
        ("bad.csv", b"sentence1,sentence2,score\na,b,1\nc,d,high\ne,f,2\n", "text/csv")
    ).run()
    assert not at.exception
    assert any("line 3" in e.value for e in at.error)
    at.file_uploader(key="sim_wic_file").set_value(("bin.csv", b"\x00\x01\x02PK", "text/csv")).run()
    assert not at.exception
    assert any("binary" in e.value for e in at.error)
    at.file_uploader(key="sim_wic_file").set_value(
        (
            "words.csv",
            b"word,context1,context2,same_sense\nzebra,A horse.,A cow.,1\nbank,The river.,A bank.,0\n",
            "text/csv",
        )
    ).run()
    assert not at.exception
    assert any("no usable rows" in e.value for e in at.error)


def test_word_senses_wait_for_the_toggle_on_a_decoder():
    """Decoders: the word-sense forward passes (most of the page's time on SmolLM2) run on request."""
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.text_input(key="sb_model_custom").input("random:gpt2").run()
    next(b for b in at.button if b.label == "Run analysis").click().run()
    at.switch_page("pages/similarity.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 1  # STS only
    assert any("turn on *Compute word senses*" in c.value for c in at.caption)
    at.toggle(key="sim_wic_run").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 3  # STS, word senses, threshold sweep
