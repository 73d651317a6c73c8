"""AppTest: The Position probe tab (ui/views/positional/probe.py): its widgets, a bad max position, and
audio's frame index."""

from __future__ import annotations

from tests.app.pages.positional.helpers import media_page, page, titles


def test_probe_widgets_and_bad_max_position():
    at = page(tab="Position probe")
    at.selectbox(key="pos_probe_state").set_value("2").run()
    assert any("at state 2" in t for t in titles(at))
    at.number_input(key="pos_probe_maxpos").set_value(1).run()
    assert not at.exception
    assert any("max position must be between 2" in e.value for e in at.error)


def test_audio_probe_reads_the_frame_index(media):
    """Luo's probe applies to audio as it is: a frame's position is its index in the clip."""
    at = media_page(media["wav2vec2"], "audio", media["audio"], "Position probe")
    assert any("Position probe accuracy" in t for t in titles(at))
