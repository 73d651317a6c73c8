"""Massive activations and frame norms of speech encoders (Sun et al. 2024 on audio), over each
clip's own frames only: a value planted in Whisper's position table at a padding frame is not
seen, one planted at the first frame is found in every clip; the norms are the encoder's own."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.highnorm import scan_audio
from isoscope.engine.errors import InputError
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.media_models import AUDIO_CONV, audio_folder, save_audio_model, save_whisper

SECONDS = (0.5, 0.31, 1.0)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return load_media_folder(audio_folder(tmp_path_factory.mktemp("a"), SECONDS), "audio")


@pytest.fixture()
def whisper(tmp_path_factory):
    """A fresh load per test: tests plant values in its weights."""
    return load_model(str(save_whisper(tmp_path_factory.mktemp("whisper"))), device="cpu")


def test_padding_frames_are_not_scanned_and_the_first_frame_is(whisper, clips):
    last = whisper.layout.window_frames - 1  # past the end of every clip (all under 2 s)
    with torch.no_grad():
        whisper.encoder.embed_positions.weight[last, 3] = 5000.0
        whisper.encoder.embed_positions.weight[0, 5] = 3000.0
    scan = scan_audio(whisper, clips.items, batch_size=2)
    massive = scan.massive
    assert massive.top_value[0, 0] == pytest.approx(3000.0, rel=1e-3)  # emb: table + conv output
    assert (massive.top_dim[0, 0], massive.top_position[0, 0]) == (5, 0)
    assert massive.top_token[0, 0] == "t=0.00s"
    assert massive.carriers[0]["first frame"] == len(SECONDS)  # one per clip, none at padding
    assert massive.carriers[0]["other frame"] == 0
    frames = [math.ceil(s * 16000 / 320) for s in SECONDS]
    assert scan.frames.tolist() == frames and massive.n_tokens == sum(frames)


def test_frame_norms_are_the_encoders_on_the_clips_frames(whisper, clips):
    scan = scan_audio(whisper, clips.items, batch_size=3)
    for c, item in enumerate(clips.items):
        n = int(scan.frames[c])
        assert np.isfinite(scan.norms[:, c, :n]).all() and np.isnan(scan.norms[:, c, n:]).all()
        features = whisper.processor([item.data], sampling_rate=16000, return_tensors="pt")
        with torch.inference_mode():
            out = whisper.encoder(features["input_features"])
        want = out.last_hidden_state[0, :n].norm(dim=-1).numpy()
        np.testing.assert_allclose(scan.norms[-1, c, :n], want, rtol=1e-4)
    assert scan.frame_times(2)[-1] == pytest.approx(0.98)
    share = scan.high_norm_share(scan.thresholds(2.0))
    assert share.shape == (3,) and ((share >= 0) & (share <= 1)).all()


def test_wav2vec2_is_scanned_by_length_groups(clips, tmp_path):
    loaded = load_model(str(save_audio_model(tmp_path / "w2v")), device="cpu")
    scan = scan_audio(loaded, clips.items, batch_size=8)
    frames = []
    for item in clips.items:  # the convolution arithmetic of the feature encoder
        n = len(item.data)
        for kernel, stride in zip(
            AUDIO_CONV["conv_kernel"], AUDIO_CONV["conv_stride"], strict=True
        ):
            n = (n - kernel) // stride + 1
        frames.append(n)
    assert scan.frames.tolist() == frames
    assert scan.massive.n_tokens == sum(scan.frames) and scan.frame_seconds == 0.02


def test_a_text_model_is_refused_in_one_line(clips):
    loaded = load_model("random:bert:layers=1,width=32,heads=2", device="cpu")
    with pytest.raises(InputError, match="does not read audio"):
        scan_audio(loaded, clips.items)
