"""Whisper through the loader and the extraction (docs/methods.md section 12): the encoder of an
encoder-decoder read as audio from what its forward takes (its folder also holds a tokenizer for
the decoder), log-mel features from its own extractor, and the frames past a clip's end left out
of every statistic and of the sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
import soundfile
import torch

from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.media_models import WHISPER_WINDOW_SECONDS, audio_folder, save_whisper

RATE = 16000
# clip lengths in samples: a sliver, a frame and one sample, 0.31 s (15.5 frames), 0.5 s, 1 s,
# and 3 s (longer than the tiny extractor's 2 s window: cut to it)
LENGTHS = (100, 321, 4960, 8000, 16000, 48000)


@pytest.fixture(scope="module")
def whisper(tmp_path_factory):
    return load_model(str(save_whisper(tmp_path_factory.mktemp("whisper"))), device="cpu")


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    rng = np.random.default_rng(0)
    for i, n in enumerate(LENGTHS):
        soundfile.write(str(folder / f"clip{i}.wav"), rng.normal(0, 0.1, n), RATE)
    return load_media_folder(folder, "audio")


def _expected_frames(loaded, samples: int) -> int:
    """The rule, from the extractor's hop and the encoder's convolutions (not from isoscope)."""
    hop = loaded.processor.hop_length
    stride = loaded.encoder.conv1.stride[0] * loaded.encoder.conv2.stride[0]
    window = loaded.processor.n_samples
    return math.ceil(min(samples, window) / (hop * stride))


def test_whisper_is_read_as_audio_from_its_forward(whisper):
    info = whisper.info
    assert info.modality == "audio" and whisper.tokenizer is None
    assert type(whisper.processor).__name__ == "WhisperFeatureExtractor"
    assert info.role.startswith("speech encoder (Whisper), encoder of an encoder-decoder")
    assert info.frames_per_second == 50 and f"padded to {WHISPER_WINDOW_SECONDS:g} s" in (
        info.token_layout
    )
    assert info.position_embedding.startswith("absolute, fixed sinusoidal table")


def test_conditional_generation_checkpoint_loads_its_encoder(tmp_path):
    loaded = load_model(str(save_whisper(tmp_path / "w", conditional=True)), device="cpu")
    assert type(loaded.encoder).__name__ == "WhisperEncoder"
    assert loaded.info.architecture == "WhisperForConditionalGeneration"
    assert loaded.info.modality == "audio"


def test_frame_count_rule_on_clips_of_several_lengths(whisper, clips):
    result = extract(whisper, clips, ExtractionSettings(sample_size=500, batch_size=4))
    frames = [int((result.tokens.text_id == t).sum()) for t in range(len(LENGTHS))]
    assert frames == [_expected_frames(whisper, n) for n in LENGTHS]
    assert frames[1] == 2 and frames[-1] == whisper.layout.window_frames  # ceil; the cut
    assert result.num_tokens == sum(frames)
    cut = [n for n in result.notices if "window were cut" in n]
    assert len(cut) == 1 and "clip5.wav" in cut[0] and "clip4.wav" not in cut[0]
    assert set(result.tokens.text_id[result.sample_index]) <= set(range(len(LENGTHS)))
    last = result.tokens.take(np.flatnonzero(result.tokens.text_id == 4))
    assert last.token[0] == "t=0.00s" and last.token[-1] == "t=0.98s"


def test_padding_frames_are_left_out_of_the_statistics(whisper, clips):
    """State means over the clips' own frames of HF's encoder output, and not over the window."""
    result = extract(whisper, clips, ExtractionSettings(sample_size=500, batch_size=3))
    own, window = [], []
    for item in clips.items:
        features = whisper.processor([item.data], sampling_rate=RATE, return_tensors="pt")
        with torch.inference_mode():
            out = whisper.encoder(features["input_features"], output_hidden_states=True)
        states = list(out.hidden_states[:-1]) + [out.last_hidden_state]
        n = _expected_frames(whisper, len(item.data))
        own.append(torch.stack(states)[:, 0, :n].double().numpy())
        window.append(torch.stack(states)[:, 0].double().numpy())
    mean_own = np.concatenate(own, axis=1).mean(axis=1)
    mean_window = np.concatenate(window, axis=1).mean(axis=1)
    np.testing.assert_allclose(result.mean, mean_own, atol=1e-4)
    assert not np.allclose(result.mean, mean_window, atol=1e-3)
    one = extract(whisper, clips, ExtractionSettings(sample_size=500, batch_size=1))
    np.testing.assert_allclose(one.mean, result.mean, atol=1e-5)


def test_the_sinusoidal_table_gets_the_table_views(whisper):
    from isoscope.analysis.positional.table import position_table_weights

    table = position_table_weights(whisper)
    assert table.shape == (whisper.layout.window_frames, whisper.info.hidden_size)


def test_other_rates_and_stereo_go_through_whisper(whisper, tmp_path):
    folder = audio_folder(tmp_path / "a", seconds=(0.5,), rate=8000)
    rng = np.random.default_rng(1)
    soundfile.write(str(folder / "stereo.wav"), rng.normal(0, 0.1, (8000, 2)), RATE)
    result = extract(whisper, load_media_folder(folder, "audio"), ExtractionSettings())
    assert result.num_tokens == 2 * 25


def test_a_random_init_copy_is_a_whisper_encoder_too(whisper, clips):
    """Godey et al.'s trained-vs-untrained contrast: the copy reads clips the same way."""
    from isoscope.engine.load.models import random_like

    copy = random_like(whisper)
    assert copy.layout == whisper.layout and copy.info.role == whisper.info.role
    assert copy.info.position_embedding.startswith("absolute, fixed sinusoidal table")
    result = extract(copy, clips, ExtractionSettings(sample_size=20))
    assert result.num_tokens == sum(_expected_frames(whisper, n) for n in LENGTHS)


def test_the_model_card_says_it_is_the_encoder_of_an_encoder_decoder(whisper):
    from isoscope.plots.overview import model_card_rows

    card = {row["field"]: row["value"] for row in model_card_rows(whisper.info.to_dict())}
    assert card["role"].startswith("speech encoder (Whisper), encoder of an encoder-decoder")
    assert card["position embeddings"] == "absolute, fixed sinusoidal table (100 audio frames)"
    bert = load_model("random:bert:layers=1,width=32,heads=2", device="cpu")
    assert "role" not in {row["field"] for row in model_card_rows(bert.info.to_dict())}


def test_a_feature_extractor_of_another_window_is_one_clear_error(tmp_path):
    from transformers import WhisperFeatureExtractor

    from isoscope.engine.errors import ModelLoadError

    folder = save_whisper(tmp_path / "w")
    WhisperFeatureExtractor(feature_size=16, chunk_length=3).save_pretrained(folder)  # not 2 s
    with pytest.raises(
        ModelLoadError, match="makes 300 mel frames per clip but the encoder takes 200"
    ):
        load_model(str(folder), device="cpu")
