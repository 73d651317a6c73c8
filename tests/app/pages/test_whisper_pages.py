"""Every page on a tiny Whisper and a folder of clips: each opens without an exception or an error
(the views that need text say so in one line), and the Overview's card names the role."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.frame.selection import Selection
from tests.media_models import audio_folder, save_whisper

APP = str(Path(__file__).resolve().parents[3] / "app.py")
PAGES = sorted(p.stem for p in (Path(APP).parent / "pages").glob("*.py") if p.stem != "__init__")


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    root = tmp_path_factory.mktemp("whisper-pages")
    return str(save_whisper(root / "whisper")), str(audio_folder(root / "clips"))


@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_on_whisper(speech, page):
    model, clips = speech
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["isoscope_selection"] = Selection(
        model_source=model,
        corpus_kind="audio",
        corpus_text=clips,
        settings=ExtractionSettings(sample_size=200),
    )
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    if page == "overview":
        cells = " ".join(str(t.value.to_dict()) for t in at.table)  # the model card
        assert "speech encoder (Whisper), encoder of an encoder-decoder" in cells
