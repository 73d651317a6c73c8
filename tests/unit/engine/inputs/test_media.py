"""Image and audio folders: classes, order, limits, broken files, the demo sets."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from PIL import Image

from isoscope.engine.errors import InputError
from isoscope.engine.inputs.media import (
    MediaCorpus,
    demo_images,
    demo_speech,
    load_media_folder,
    resample,
)


def _png(path, size=(20, 16), colour=(200, 10, 10)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def _wav(path, seconds=0.5, rate=8000, channels=1):
    import soundfile

    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    wave = np.sin(2 * np.pi * 220 * t).astype(np.float32)
    soundfile.write(str(path), np.stack([wave] * channels, axis=1), rate)


def test_images_with_classes_in_sorted_order(tmp_path):
    _png(tmp_path / "dogs" / "b.png")
    _png(tmp_path / "cats" / "z.jpg".replace("jpg", "png"))
    Image.new("RGB", (8, 8)).save(tmp_path / "cats" / "a.webp")
    corpus = load_media_folder(tmp_path, "image")
    assert corpus.kind == "image"
    assert corpus.texts == ("cats/a.webp", "cats/z.png", "dogs/b.png")
    assert corpus.labels == ("cats", "cats", "dogs")
    assert corpus.items[1].data.shape == (16, 20, 3) and corpus.items[1].data.dtype == np.uint8
    assert corpus.notices == ()


def test_top_level_files_have_no_class(tmp_path):
    _png(tmp_path / "a.png")
    assert load_media_folder(tmp_path, "image").labels == ("",)


def test_broken_and_other_files_are_skipped_by_name(tmp_path):
    _png(tmp_path / "good.png")
    (tmp_path / "broken.png").write_bytes(b"not a png at all")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / ".hidden.png").write_bytes(b"x")
    corpus = load_media_folder(tmp_path, "image")
    assert corpus.texts == ("good.png",)
    joined = " ".join(corpus.notices)
    assert "broken.png" in joined and "notes.txt" in joined and ".hidden" not in joined


def test_folder_with_nothing_readable_is_one_error(tmp_path):
    (tmp_path / "broken.png").write_bytes(b"nope")
    with pytest.raises(InputError, match="none readable.*broken.png"):
        load_media_folder(tmp_path, "image")
    with pytest.raises(InputError, match="no audio files"):
        load_media_folder(tmp_path, "audio")
    with pytest.raises(InputError, match="does not exist"):
        load_media_folder(tmp_path / "missing", "image")


def test_limits_are_applied_with_notices(tmp_path):
    for i in range(4):
        _png(tmp_path / f"{i}.png", size=(100, 100))
    corpus = load_media_folder(tmp_path, "image", max_files=3, max_pixels=2500)
    assert len(corpus) == 3
    assert corpus.items[0].data.shape[0] * corpus.items[0].data.shape[1] <= 2500
    assert any("first 3 of 4" in n for n in corpus.notices)
    assert any("scaled down" in n for n in corpus.notices)


def test_audio_is_mono_and_cut(tmp_path):
    _wav(tmp_path / "speech" / "a.wav", seconds=1.0, rate=8000, channels=2)
    _wav(tmp_path / "b.flac", seconds=0.25, rate=16000)
    corpus = load_media_folder(tmp_path, "audio", max_seconds=0.5)
    assert corpus.texts == ("b.flac", "speech/a.wav")
    assert corpus.labels == ("", "speech")
    first, second = corpus.items
    assert first.rate == 16000 and first.data.ndim == 1 and first.seconds == pytest.approx(0.25)
    assert second.rate == 8000 and len(second.data) == 4000
    assert any("cut" in n for n in corpus.notices)


def test_sha_follows_content_not_name(tmp_path):
    _png(tmp_path / "a" / "x.png")
    one = load_media_folder(tmp_path / "a", "image")
    two = load_media_folder(tmp_path / "a", "image", name="other")
    assert one.sha == two.sha
    _png(tmp_path / "a" / "x.png", colour=(0, 0, 0))
    assert load_media_folder(tmp_path / "a", "image").sha != one.sha


def test_resample_changes_the_rate():
    samples = np.zeros(22050, dtype=np.float32)
    assert len(resample(samples, 22050, 16000)) == 16000
    assert resample(samples, 16000, 16000) is not None


def test_empty_media_corpus_is_refused():
    with pytest.raises(InputError):
        MediaCorpus((), "empty", "image")


def test_demo_images_are_tiles_of_the_sklearn_photos():
    corpus = demo_images()
    assert len(corpus) == 8 and set(corpus.labels) == {"china", "flower"}
    assert corpus.items[0].data.shape == (213, 320, 3)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_demo_speech_is_synthesised_once(tmp_path):
    corpus = demo_speech(tmp_path, count=2)
    assert corpus.kind == "audio" and len(corpus) == 2
    assert all(item.seconds > 0.3 for item in corpus.items)
    assert demo_speech(tmp_path, count=2).sha == corpus.sha


def test_demo_speech_without_espeak_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="apt-get install espeak-ng"):
        demo_speech(tmp_path, count=1)
