"""Tiny random image, audio and character-level checkpoints saved with their processors, for the
tests of non-text inputs (nothing is downloaded: configs and processors are built here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
IMAGE_SIZE = 28  # 4x4 patches of 7 px
AUDIO_CONV = {  # 320 samples per frame: 50 frames per second at 16 kHz, like wav2vec2 base
    "conv_dim": (16, 16, 16, 16),
    "conv_stride": (5, 4, 4, 4),
    "conv_kernel": (10, 4, 4, 4),
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2,
}


def _image_processor():
    from transformers import ViTImageProcessor

    return ViTImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


def save_image_model(kind: str, folder: Path) -> Path:
    """``vit``, ``deit``, ``dinov2-reg``, ``clip``, ``siglip`` (the vision tower: no [CLS], a
    position row per patch), ``beit`` (a relative position bias per layer, no absolute table, as
    BEiT-base) or ``vitmae`` as a checkpoint folder."""
    import transformers as tf

    torch.manual_seed(0)
    common = dict(TINY, image_size=IMAGE_SIZE, patch_size=7)
    if kind == "vit":
        model = tf.ViTModel(tf.ViTConfig(intermediate_size=64, **common))
    elif kind == "deit":
        model = tf.DeiTModel(tf.DeiTConfig(intermediate_size=64, **common))
    elif kind == "dinov2-reg":
        config = tf.Dinov2WithRegistersConfig(mlp_ratio=2, num_register_tokens=4, **common)
        model = tf.Dinov2WithRegistersModel(config)
    elif kind == "clip":
        model = tf.CLIPVisionModel(tf.CLIPVisionConfig(intermediate_size=64, **common))
    elif kind == "siglip":
        model = tf.SiglipVisionModel(tf.SiglipVisionConfig(intermediate_size=64, **common))
    elif kind == "beit":
        config = tf.BeitConfig(intermediate_size=64, use_relative_position_bias=True, **common)
        model = tf.BeitModel(config)
    elif kind == "vitmae":
        model = tf.ViTMAEModel(tf.ViTMAEConfig(intermediate_size=64, mask_ratio=0.75, **common))
    else:
        raise ValueError(kind)
    model.save_pretrained(folder)
    _image_processor().save_pretrained(folder)
    return folder


def save_audio_model(folder: Path, *, group_norm: bool = True, hubert: bool = False) -> Path:
    """A wav2vec2 (or HuBERT) checkpoint: group norm and no attention mask (wav2vec2 base's
    recipe), or layer norm with an attention mask (large-lv60's)."""
    import transformers as tf

    torch.manual_seed(0)
    norm = {
        "feat_extract_norm": "group" if group_norm else "layer",
        "do_stable_layer_norm": not group_norm,
    }
    kwargs = dict(TINY, intermediate_size=64, **AUDIO_CONV, **norm)
    if hubert:
        model = tf.HubertModel(tf.HubertConfig(**kwargs))
    else:
        model = tf.Wav2Vec2Model(tf.Wav2Vec2Config(**kwargs))
    model.save_pretrained(folder)
    tf.Wav2Vec2FeatureExtractor(return_attention_mask=not group_norm).save_pretrained(folder)
    return folder


def save_canine(folder: Path) -> Path:
    import transformers as tf

    torch.manual_seed(0)
    config = tf.CanineConfig(
        intermediate_size=64, num_hash_buckets=64, num_hash_functions=2, **TINY
    )
    tf.CanineModel(config).save_pretrained(folder)
    tf.CanineTokenizer().save_pretrained(folder)
    return folder


def save_byt5(folder: Path) -> Path:
    import transformers as tf

    torch.manual_seed(0)
    config = tf.T5Config(d_model=32, num_layers=2, num_heads=2, d_ff=64, d_kv=16, vocab_size=384)
    tf.T5Model(config).save_pretrained(folder)
    tf.ByT5Tokenizer().save_pretrained(folder)
    return folder


def image_folder(folder: Path, count: int = 3) -> Path:
    """``count`` small random images in two classes."""
    rng = np.random.default_rng(0)
    for i in range(count):
        path = folder / ("cats" if i % 2 else "dogs") / f"{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 255, size=(40 + 4 * i, 36, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path)
    return folder


def audio_folder(folder: Path, seconds: tuple[float, ...] = (0.5, 0.3, 0.5), rate=16000) -> Path:
    """Noise clips of the given lengths (wav at ``rate``)."""
    import soundfile

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(seconds):
        soundfile.write(str(folder / f"clip{i}.wav"), rng.normal(0, 0.1, int(s * rate)), rate)
    return folder


WHISPER_WINDOW_SECONDS = 2  # the tiny extractor's window: 200 mel frames, 100 encoder frames


def save_whisper(folder: Path, *, conditional: bool = False) -> Path:
    """A tiny Whisper (``WhisperModel``, or ``WhisperForConditionalGeneration``) with its own
    small feature extractor (16 mel bins, a 2 s window) and a tokenizer for its decoder, as a
    trained Whisper folder holds one."""
    import transformers as tf

    from tests.zoo import tokenizer

    torch.manual_seed(0)
    hop = 160
    config = tf.WhisperConfig(
        vocab_size=128,
        d_model=32,
        encoder_layers=2,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_mel_bins=16,
        max_source_positions=WHISPER_WINDOW_SECONDS * 16000 // hop // 2,
        max_target_positions=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    cls = tf.WhisperForConditionalGeneration if conditional else tf.WhisperModel
    cls(config).save_pretrained(folder)
    tf.WhisperFeatureExtractor(
        feature_size=16, hop_length=hop, chunk_length=WHISPER_WINDOW_SECONDS
    ).save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return folder
