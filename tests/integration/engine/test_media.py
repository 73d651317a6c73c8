"""Images and audio through the loader and the extraction: token tables that mean something
(patch grid, prefix tokens, frame times) and the known traps (final LayerNorm, registers, random
masking, group-norm padding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model

SETTINGS = ExtractionSettings(sample_size=40, batch_size=2)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return load_media_folder(image_folder(tmp_path_factory.mktemp("images")), "image")


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return load_media_folder(audio_folder(tmp_path_factory.mktemp("audio")), "audio")


def _load(kind, tmp_path_factory):
    return load_model(str(save_image_model(kind, tmp_path_factory.mktemp(kind))), device="cpu")


def _last_hidden(loaded, images):
    pixels = loaded.processor(images=[i.data for i in images.items], return_tensors="pt")
    with torch.inference_mode():
        out = loaded.encoder(pixel_values=pixels["pixel_values"], output_hidden_states=True)
    return out


def test_vit_tokens_are_cls_and_a_patch_grid(images, tmp_path_factory):
    loaded = _load("vit", tmp_path_factory)
    info = loaded.info
    assert (info.modality, info.patch_grid, info.prefix_tokens) == ("image", (4, 4), ("[CLS]",))
    assert info.token_layout == "1 CLS + 4x4 patches of 7 px" and info.input_size == "28x28 px"
    assert loaded.tokenizer is None and loaded.processor is not None
    result = extract(loaded, images, SETTINGS)
    tokens = result.tokens
    assert result.num_tokens == 3 * 17 and result.texts == images.texts
    first = tokens.take(np.flatnonzero(tokens.text_id == 0))
    assert list(first.token[:3]) == ["[CLS]", "patch r0c0", "patch r0c1"]
    assert first.token[-1] == "patch r3c3" and list(first.position) == list(range(17))
    assert first.is_special.tolist() == [True] + [False] * 16
    assert result.extra["inputs"] == {"kind": "image", "labels": ["cats", "dogs", "dogs"]}


def test_vit_final_state_is_the_final_layernorm_output(images, tmp_path_factory):
    """ViT's hidden_states[-1] lacks the final LayerNorm; state L is last_hidden_state, as a text
    model's last state (GPT-2's, after ln_f) is."""
    loaded = _load("vit", tmp_path_factory)
    out = _last_hidden(loaded, images)
    assert not torch.allclose(out.last_hidden_state, out.hidden_states[-1])
    result = extract(loaded, images, SETTINGS)
    mean_last = out.last_hidden_state.double().mean(dim=(0, 1)).numpy()
    mean_pre = out.hidden_states[-1].double().mean(dim=(0, 1)).numpy()
    np.testing.assert_allclose(result.mean[-1], mean_last, atol=1e-5)
    assert not np.allclose(result.mean[-1], mean_pre, atol=1e-3)
    np.testing.assert_allclose(
        result.mean[1], out.hidden_states[1].double().mean(dim=(0, 1)).numpy(), atol=1e-5
    )


def test_dinov2_with_registers_has_one_plus_four_prefix_tokens(images, tmp_path_factory):
    loaded = _load("dinov2-reg", tmp_path_factory)
    assert loaded.info.prefix_tokens == ("[CLS]", "[REG1]", "[REG2]", "[REG3]", "[REG4]")
    assert loaded.info.token_layout == "1 CLS + 4 REG + 4x4 patches of 7 px"
    result = extract(loaded, images, SETTINGS)
    first = result.tokens.take(np.flatnonzero(result.tokens.text_id == 0))
    assert len(first) == 5 + 16 and first.token[5] == "patch r0c0"
    assert first.is_special.sum() == 5
    kept = extract(loaded, images, ExtractionSettings(sample_size=40, exclude_special=True))
    assert kept.num_tokens == 3 * 16 and not kept.tokens.is_special.any()


def test_deit_has_a_distillation_token(tmp_path_factory):
    loaded = _load("deit", tmp_path_factory)
    assert loaded.info.prefix_tokens == ("[CLS]", "[DIST]")


def test_clip_vision_tower_loads_and_extracts(images, tmp_path_factory):
    loaded = _load("clip", tmp_path_factory)
    assert loaded.info.prefix_tokens == ("[CLS]",) and loaded.info.patch_grid == (4, 4)
    out = _last_hidden(loaded, images)
    result = extract(loaded, images, SETTINGS)
    np.testing.assert_allclose(
        result.mean[-1], out.last_hidden_state.double().mean(dim=(0, 1)).numpy(), atol=1e-5
    )
    assert result.num_states == loaded.info.num_layers + 1


def test_vitmae_random_masking_is_turned_off(images, tmp_path_factory):
    loaded = _load("vitmae", tmp_path_factory)
    assert loaded.encoder.config.mask_ratio == 0.0
    one = extract(loaded, images, SETTINGS)
    two = extract(loaded, images, SETTINGS)
    assert one.num_tokens == 3 * 17  # every patch kept
    np.testing.assert_array_equal(one.mean, two.mean)
    assert any("masking turned off" in n for n in one.notices)


def test_image_models_refuse_text_and_text_models_refuse_images(images, tmp_path_factory):
    from isoscope.engine.inputs.corpus import corpus_from_text

    loaded = _load("vit", tmp_path_factory)
    with pytest.raises(InputError, match="reads image, not text.*choose a text model"):
        extract(loaded, corpus_from_text("a sentence"), SETTINGS)
    text_model = load_model("random:bert:layers=1,width=16,heads=2", device="cpu")
    with pytest.raises(InputError, match="reads text, not image.*choose an image model"):
        extract(text_model, images, SETTINGS)


def test_random_vit_source(images):
    loaded = load_model("random:vit:layers=1,width=16,heads=2", device="cpu")
    assert loaded.info.patch_grid == (14, 14) and loaded.info.modality == "image"


# ----------------------------------------------------------------------------- audio


def test_wav2vec2_frames_and_times(clips, tmp_path_factory):
    loaded = load_model(str(save_audio_model(tmp_path_factory.mktemp("w2v"))), device="cpu")
    info = loaded.info
    assert info.modality == "audio" and info.frames_per_second == 50
    assert info.input_size == "16,000 Hz mono"
    assert "equal-length batches" in info.token_layout
    result = extract(loaded, clips, SETTINGS)
    frames = [int((result.tokens.text_id == t).sum()) for t in range(3)]
    assert frames == [24, 14, 24]  # 0.5 s and 0.3 s at 320 samples per frame (conv edges)
    first = result.tokens.take(np.flatnonzero(result.tokens.text_id == 0))
    assert first.token[0] == "t=0.00s" and first.token[10] == "t=0.20s"
    assert not result.tokens.is_special.any()


def test_group_norm_wav2vec2_is_batched_by_length_without_padding(clips, tmp_path_factory):
    """Group-norm checkpoints change their output when a clip is padded: a batch of mixed lengths
    must give the same statistics as one clip at a time."""
    loaded = load_model(str(save_audio_model(tmp_path_factory.mktemp("w2v-g"))), device="cpu")
    assert not loaded.layout.pad_with_mask
    together = extract(loaded, clips, ExtractionSettings(sample_size=40, batch_size=8))
    alone = extract(loaded, clips, ExtractionSettings(sample_size=40, batch_size=1))
    np.testing.assert_allclose(together.mean, alone.mean, atol=1e-5)
    np.testing.assert_allclose(together.variance, alone.variance, atol=1e-5)


def test_padding_would_change_a_group_norm_model(clips, tmp_path_factory):
    """The trap itself: zero-padding a clip changes a group-norm model's frames."""
    loaded = load_model(str(save_audio_model(tmp_path_factory.mktemp("w2v-p"))), device="cpu")
    short = clips.items[1].data
    padded = np.concatenate([short, np.zeros(3200, dtype=np.float32)])
    fe = loaded.processor
    with torch.inference_mode():
        a = loaded.encoder(
            **fe([short], sampling_rate=16000, return_tensors="pt")
        ).last_hidden_state
        b = loaded.encoder(
            **fe([padded], sampling_rate=16000, return_tensors="pt")
        ).last_hidden_state
    assert not torch.allclose(a[0], b[0, : a.shape[1]], atol=1e-4)


def test_layer_norm_wav2vec2_pads_with_a_mask(clips, tmp_path_factory):
    folder = save_audio_model(tmp_path_factory.mktemp("w2v-l"), group_norm=False)
    loaded = load_model(str(folder), device="cpu")
    assert loaded.layout.pad_with_mask and "padded with a mask" in loaded.info.token_layout
    result = extract(loaded, clips, ExtractionSettings(sample_size=40, batch_size=8))
    assert result.num_tokens == 24 + 14 + 24


def test_hubert_loads_as_audio(clips, tmp_path_factory):
    folder = save_audio_model(tmp_path_factory.mktemp("hubert"), hubert=True)
    loaded = load_model(str(folder), device="cpu")
    assert loaded.info.modality == "audio"
    assert extract(loaded, clips, SETTINGS).num_tokens == 62


def test_resampled_to_the_model_rate(tmp_path_factory):
    clips8k = load_media_folder(
        audio_folder(tmp_path_factory.mktemp("a8k"), seconds=(0.5,), rate=8000), "audio"
    )
    loaded = load_model(str(save_audio_model(tmp_path_factory.mktemp("w2v-r"))), device="cpu")
    assert extract(loaded, clips8k, SETTINGS).num_tokens == 24  # 0.5 s at 16 kHz


def test_a_saved_image_analysis_reopens(images, tmp_path_factory, tmp_path):
    from isoscope.engine.store.saved import load_saved, save_analysis

    result = extract(_load("vit", tmp_path_factory), images, SETTINGS)
    reopened = load_saved(save_analysis(result, tmp_path / "run.isoscope"))
    assert reopened.extra["inputs"]["kind"] == "image"
    assert list(reopened.tokens.token) == list(result.tokens.token)


def test_cached_extract_keeps_the_inputs(images, tmp_path_factory, tmp_path):
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract

    loaded = _load("vit", tmp_path_factory)
    cache = ResultCache(tmp_path)
    first = cached_extract(loaded, images, SETTINGS, cache=cache)
    again = cached_extract(loaded, images, SETTINGS, cache=cache)
    assert again.extra == first.extra and again.corpus_sha == images.sha


def test_mean_pooled_images_equal_the_mean_of_every_token(images, tmp_path_factory):
    """:func:`mean_pooled` of images: one vector per image over all its output tokens (CKA's item
    basis when two models cut the images differently)."""
    from isoscope.engine.extraction import mean_pooled

    loaded = _load("dinov2-reg", tmp_path_factory)
    pooled = mean_pooled(loaded, images.items, batch_size=2)
    assert pooled.shape == (3, 3, 32)
    states = _last_hidden(loaded, images).hidden_states
    np.testing.assert_allclose(pooled[1], states[1].double().mean(dim=1).numpy(), atol=1e-5)


def test_mean_pooled_clips_of_a_group_norm_model_are_not_padded(clips, tmp_path_factory):
    from isoscope.engine.extraction import mean_pooled

    loaded = load_model(str(save_audio_model(tmp_path_factory.mktemp("w2v-m"))), device="cpu")
    together = mean_pooled(loaded, clips.items, batch_size=8)
    alone = mean_pooled(loaded, clips.items, batch_size=1)
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_siglip_vision_tower_has_no_prefix_and_extracts(images, tmp_path_factory):
    loaded = _load("siglip", tmp_path_factory)
    assert loaded.info.prefix_tokens == () and loaded.info.patch_grid == (4, 4)
    out = _last_hidden(loaded, images)
    result = extract(loaded, images, SETTINGS)
    assert result.num_tokens == 3 * 16 and not result.tokens.is_special.any()
    np.testing.assert_allclose(
        result.mean[-1], out.last_hidden_state.double().mean(dim=(0, 1)).numpy(), atol=1e-5
    )


def test_beit_loads_and_extracts(images, tmp_path_factory):
    loaded = _load("beit", tmp_path_factory)
    assert loaded.info.prefix_tokens == ("[CLS]",) and loaded.info.patch_grid == (4, 4)
    result = extract(loaded, images, SETTINGS)
    assert result.num_tokens == 3 * 17 and result.num_states == loaded.info.num_layers + 1


@pytest.mark.parametrize(
    ("kind", "prefix_rows"),
    [
        ("vit", 1),
        ("deit", 2),
        ("dinov2-reg", 1),
        ("clip", 1),
        ("siglip", 0),
        ("vitmae", 1),
    ],
)
def test_patch_position_table_is_read_from_the_parameters(kind, prefix_rows, tmp_path_factory):
    from isoscope.engine.arch.layout import patch_position_table

    loaded = _load(kind, tmp_path_factory)
    table = patch_position_table(loaded.encoder, loaded.layout)
    assert table is not None and table.grid == (4, 4) and table.patches.shape == (16, 32)
    assert table.prefix_rows == prefix_rows
    params = dict(loaded.encoder.named_parameters())
    weights = params.get(table.path, params.get(table.path + ".weight"))
    np.testing.assert_allclose(
        table.patches, weights.detach().reshape(-1, 32)[-16:].double().numpy()
    )


def test_beit_and_wav2vec2_say_what_they_use_instead_of_a_table(clips, tmp_path_factory):
    from isoscope.engine.arch.layout import patch_position_table, position_scheme_note

    beit = _load("beit", tmp_path_factory)
    assert patch_position_table(beit.encoder, beit.layout) is None
    assert "relative position bias" in position_scheme_note(beit.encoder, beit.layout)
    audio = load_model(str(save_audio_model(tmp_path_factory.mktemp("w2v"))), device="cpu")
    assert "convolutional relative position" in position_scheme_note(audio.encoder, audio.layout)


def test_dinov2_table_of_a_larger_resolution_is_interpolated_not_missed(images, tmp_path):
    """A DINOv2 trained at 35 px (5x5 patches) reads 28 px images (4x4): its table is shown on
    its own 5x5 grid."""
    import transformers as tf

    from isoscope.engine.arch.layout import patch_position_table
    from tests.media_models import TINY, _image_processor

    torch.manual_seed(0)
    config = tf.Dinov2Config(mlp_ratio=2, image_size=35, patch_size=7, **TINY)
    tf.Dinov2Model(config).save_pretrained(tmp_path)
    _image_processor().save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), device="cpu")
    assert loaded.layout.grid == (4, 4)
    table = patch_position_table(loaded.encoder, loaded.layout)
    assert table.grid == (5, 5) and table.interpolated_to == (4, 4) and table.prefix_rows == 1
