"""Images and clips a processor cannot take as they are (issue 33 item 4): each is converted where
that is sound, or skipped with its name in the note, and never ends in an internal error. One
test per case, through the folder reader and, where the model matters, the extraction."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile
from PIL import Image

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.extraction.media import model_view
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.media_models import save_audio_model, save_image_model

SETTINGS = ExtractionSettings(sample_size=20)


@pytest.fixture(scope="module")
def vit(tmp_path_factory):
    return load_model(str(save_image_model("vit", tmp_path_factory.mktemp("vit"))), device="cpu")


@pytest.fixture(scope="module")
def wav2vec2(tmp_path_factory):
    folder = save_audio_model(tmp_path_factory.mktemp("w2v"), group_norm=False)
    return load_model(str(folder), device="cpu")


def _one_image(tmp_path, name: str, image: Image.Image, **save):
    image.save(tmp_path / name, **save)
    return load_media_folder(tmp_path, "image")


def _note(corpus, name: str) -> str:
    notes = [n for n in corpus.notices if name in n]
    assert len(notes) == 1, corpus.notices
    return notes[0]


# ----------------------------------------------------------------------------- images


def test_a_1x1_image_is_extracted(vit, tmp_path):
    """The issue's case: 'mean must have 1 elements' (the processor took the 3 colours of a
    (1, 1, 3) array for 1 channel)."""
    corpus = _one_image(tmp_path, "dot.png", Image.new("RGB", (1, 1), (200, 30, 10)))
    assert corpus.notices == ()  # an RGB image: nothing converted; the processor resizes it
    assert extract(vit, corpus, SETTINGS).num_tokens == 17
    view = model_view(vit, corpus.items[0]).reshape(-1, 3)
    assert np.abs(view.astype(int) - [200, 30, 10]).max() <= 1  # the model sees that colour


def test_a_3x3_image_keeps_its_channels_last(vit, tmp_path):
    """A (3, 3, 3) array is ambiguous to a processor; the model must see red on the left."""
    pixels = np.zeros((3, 3, 3), dtype=np.uint8)
    pixels[:, 0, 0] = pixels[:, 1, 1] = pixels[:, 2, 2] = 255  # columns: red, green, blue
    corpus = _one_image(tmp_path, "rgb.png", Image.fromarray(pixels))
    view = model_view(vit, corpus.items[0]).astype(int)
    left, right = view[:, :3].mean(axis=(0, 1)), view[:, -3:].mean(axis=(0, 1))
    assert left.argmax() == 0 and right.argmax() == 2


def test_a_single_channel_image_becomes_gray_rgb(vit, tmp_path):
    gray = np.arange(20 * 20, dtype=np.uint8).reshape(20, 20)
    corpus = _one_image(tmp_path, "gray.png", Image.fromarray(gray))
    assert "grayscale" in _note(corpus, "gray.png")
    data = corpus.items[0].data
    assert data.shape == (20, 20, 3) and (data == gray[..., None]).all()
    assert extract(vit, corpus, SETTINGS).num_tokens == 17


def test_a_16_bit_image_is_scaled_not_clipped(tmp_path):
    ramp = np.linspace(0, 65535, 20 * 20).astype(np.uint16).reshape(20, 20)
    corpus = _one_image(tmp_path, "deep.png", Image.fromarray(ramp))
    assert "8 bits" in _note(corpus, "deep.png")
    data = corpus.items[0].data[..., 0].astype(int)
    expected = np.rint(ramp / 257.0).astype(int)
    assert np.abs(data - expected).max() <= 1  # convert("RGB") would make most of it 255


def test_a_cmyk_image_is_converted(vit, tmp_path):
    cmyk = Image.new("CMYK", (20, 20), (0, 255, 255, 0))  # red in CMYK
    corpus = _one_image(tmp_path, "print.jpg", cmyk, quality=95)
    assert "CMYK" in _note(corpus, "print.jpg")
    red = corpus.items[0].data.reshape(-1, 3).mean(axis=0)
    assert red[0] > 200 and red[1] < 60 and red[2] < 60
    assert extract(vit, corpus, SETTINGS).num_tokens == 17


def test_a_palette_image_gets_its_palette_colours(tmp_path):
    palette = Image.new("P", (20, 20), 1)
    palette.putpalette([0, 0, 0, 10, 200, 30] + [0] * (256 * 3 - 6))
    corpus = _one_image(tmp_path, "pal.png", palette)
    assert "palette" in _note(corpus, "pal.png")
    assert (corpus.items[0].data.reshape(-1, 3) == [10, 200, 30]).all()


def test_transparent_pixels_are_put_on_white(vit, tmp_path):
    rgba = np.zeros((20, 20, 4), dtype=np.uint8)  # transparent black ...
    rgba[:10] = (0, 0, 255, 255)  # ... under an opaque blue top half
    corpus = _one_image(tmp_path, "alpha.png", Image.fromarray(rgba))
    assert "white" in _note(corpus, "alpha.png")
    data = corpus.items[0].data
    assert (data[:10] == [0, 0, 255]).all() and (data[10:] == 255).all()
    assert extract(vit, corpus, SETTINGS).num_tokens == 17


def test_exif_rotation_is_applied(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    corpus = _one_image(tmp_path, "phone.jpg", Image.new("RGB", (30, 20), (9, 9, 9)), exif=exif)
    assert "upright" in _note(corpus, "phone.jpg")
    assert corpus.items[0].data.shape == (30, 20, 3)


# ----------------------------------------------------------------------------- clips


def _noise(seconds: float, rate: int, channels: int = 1) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.uniform(-0.5, 0.5, (int(seconds * rate), channels))


def test_a_stereo_clip_is_averaged_to_mono(tmp_path):
    stereo = _noise(0.2, 16000, channels=2)
    soundfile.write(str(tmp_path / "st.wav"), stereo, 16000, subtype="FLOAT")
    data = load_media_folder(tmp_path, "audio").items[0].data
    np.testing.assert_allclose(data, stereo.mean(axis=1), atol=1e-6)


@pytest.mark.parametrize(("subtype", "step"), [("PCM_U8", 1 / 128), ("PCM_24", 1 / 2**23)])
def test_8_and_24_bit_clips_are_read_at_their_depth(subtype, step, wav2vec2, tmp_path):
    clip = _noise(0.5, 16000)
    soundfile.write(str(tmp_path / "c.wav"), clip, 16000, subtype=subtype)
    corpus = load_media_folder(tmp_path, "audio")
    assert np.abs(corpus.items[0].data - clip[:, 0]).max() <= step
    assert extract(wav2vec2, corpus, SETTINGS).num_tokens == 24


@pytest.mark.parametrize("rate", [8000, 22050, 44100])
def test_other_sample_rates_are_resampled(rate, wav2vec2, tmp_path):
    soundfile.write(str(tmp_path / "c.wav"), _noise(0.5, rate), rate)
    corpus = load_media_folder(tmp_path, "audio")
    assert corpus.items[0].rate == rate
    assert extract(wav2vec2, corpus, SETTINGS).num_tokens == 24  # 0.5 s at the model's 16 kHz


def test_a_too_short_clip_is_skipped_by_name(wav2vec2, tmp_path):
    soundfile.write(str(tmp_path / "ok.wav"), _noise(0.5, 16000), 16000)
    soundfile.write(str(tmp_path / "blip.wav"), _noise(0.005, 16000), 16000)  # 80 samples
    result = extract(wav2vec2, load_media_folder(tmp_path, "audio"), SETTINGS)
    note = next(n for n in result.notices if "blip.wav" in n)
    assert "too short" in note and "skipped" in note and "ok.wav" not in note
    assert result.num_tokens == 24 and set(result.tokens.text_id) == {1}  # ok.wav only


def test_only_too_short_clips_is_one_input_error(wav2vec2, tmp_path):
    soundfile.write(str(tmp_path / "blip.wav"), _noise(0.005, 16000), 16000)
    with pytest.raises(InputError, match=r"too short.*blip\.wav"):
        extract(wav2vec2, load_media_folder(tmp_path, "audio"), SETTINGS)


def test_a_clip_with_nan_samples_is_skipped_by_name(tmp_path):
    bad = _noise(0.2, 16000)
    bad[10] = np.nan
    soundfile.write(str(tmp_path / "nan.wav"), bad, 16000, subtype="FLOAT")
    soundfile.write(str(tmp_path / "ok.wav"), _noise(0.2, 16000), 16000)
    corpus = load_media_folder(tmp_path, "audio")
    assert corpus.texts == ("ok.wav",)
    assert "nan.wav (holds NaN or infinite samples)" in _note(corpus, "nan.wav")
