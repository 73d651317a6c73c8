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


def test_a_gated_repo_says_licence_and_token(standin_hub, tiny_bert_dir):
    """Public metadata, files 401 ``GatedRepo`` (as Llama, Gemma and Mistral answer): the
    sidebar's run says to accept the licence and set HF_TOKEN, not to run it again."""
    standin_hub.add_folder("org/gated", tiny_bert_dir)
    standin_hub.repos["org/gated"].token = "hf_secret"
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    _analyse(at, "org/gated")
    (error,) = [e.value for e in at.error if "org/gated" in e.value]
    assert "licence" in error and "HF_TOKEN" in error
    assert "again to resume" not in error
    assert not standin_hub.downloads("model.safetensors")


def test_the_load_after_a_download_says_the_downloads_estimate_again(
    standin_hub, tiny_bert_dir, monkeypatch
):
    """The bar's first-page estimate (computed once, before the weights come) is what the
    loading spinner then says: the load does not read the tokenizer again for it."""
    import streamlit

    from isoscope.engine.budget import time_estimate
    from isoscope.ui.frame.selection import Selection
    from isoscope.ui.frame.session import SELECTION_KEY

    standin_hub.add_folder("org/tiny-bert-estimate", tiny_bert_dir)
    said, estimates = [], []
    spinner, estimate = streamlit.spinner, time_estimate.estimate_first_page

    def recording_spinner(text, *args, **kwargs):
        said.append(text)
        return spinner(text, *args, **kwargs)

    def counting_estimate(*args):
        estimates.append(estimate(*args))
        return estimates[-1]

    monkeypatch.setattr(streamlit, "spinner", recording_spinner)
    monkeypatch.setattr(time_estimate, "estimate_first_page", counting_estimate)
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state[SELECTION_KEY] = Selection(
        model_source="org/tiny-bert-estimate",
        device="cpu",
        corpus_kind="paste",
        corpus_text="The bank raised its rates.\nWe sat on the river bank.",
    )
    at.run()
    assert not at.exception and not at.error
    (first_page,) = estimates
    assert f"Loading org/tiny-bert-estimate · {first_page.describe()}" in said
