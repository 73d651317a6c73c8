"""``isoscope massive --audio`` as a user runs it: a Whisper folder (with a tokenizer for its
decoder) is scanned over each clip's own frames; a text model given clips, and Whisper given
texts, exit 2 with one line."""

from __future__ import annotations

import json
import math

import pytest

from tests.integration.commands.test_massive import _run
from tests.media_models import audio_folder, save_whisper

SECONDS = (0.5, 0.31)


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    root = tmp_path_factory.mktemp("massive-audio")
    return save_whisper(root / "whisper"), audio_folder(root / "clips", SECONDS)


def test_audio_gives_carriers_and_high_norm_frames(speech, tmp_path):
    model, folder = speech
    out = tmp_path / "massive.json"
    args = ("--model", str(model), "--audio", str(folder), "--out", str(out), "--device", "cpu")
    proc = _run(*args, cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    frames = {f"clip{i}.wav": math.ceil(s * 16000 / 320) for i, s in enumerate(SECONDS)}
    assert data["corpus"]["frames_per_clip"] == frames
    assert data["corpus"]["clips"] == 2 and data["corpus"]["frames"] == sum(frames.values())
    assert data["model"]["role"].startswith("speech encoder (Whisper)")
    assert set(data["carriers"][0]) == {"state", "first frame", "other frame"}
    for h in data["high_norm"]:
        assert h["threshold"] == pytest.approx(2.0 * h["median_frame_norm"])
        assert 0 <= h["share"] <= 1
    for layer in data["layers"]:
        for top in layer["top"]:
            assert top["position"] < max(frames.values()) and top["token"].startswith("t=")
    assert "high-norm frames at state 2" in proc.stderr


def test_a_text_corpus_on_whisper_is_one_line(speech, tmp_path):
    model, _ = speech
    texts = tmp_path / "t.txt"
    texts.write_text("a text\n")
    args = ("--model", str(model), "--texts", str(texts), "--out", str(tmp_path / "o.json"))
    proc = _run(*args, "--device", "cpu", cache_dir=tmp_path / "cache")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "reads audio, not text" in errors[0]
    assert "Traceback" not in proc.stderr
