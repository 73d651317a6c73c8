"""Images and audio through the same extraction: :func:`prepare_media` plays the part of
tokenization (per item: how many output tokens, which are special, what each one is called) and
:func:`media_forward` the part of the forward pass over token ids.

Token identity (the :class:`TokenTable` columns): ``text_id`` is the item (image or clip) index,
``position`` the output-token index, ``token`` ``"[CLS]"`` / ``"[DIST]"`` / ``"[REG2]"`` /
``"patch r3c5"`` for images and ``"t=1.24s"`` (the frame's start) for audio; prefix tokens are
``is_special``; ``word_id`` is the patch or frame index (-1 for prefix tokens).

The final hidden state is the model's ``last_hidden_state`` where its shape matches: ViT, DeiT and
DINOv2 apply a final LayerNorm after the last block that ``hidden_states[-1]`` lacks, and a text
model's last state (GPT-2's, after ``ln_f``) is the normed one too; so state L means the same for
every model. Checkpoints whose batches must not be padded (group-norm wav2vec2 / HuBERT:
:attr:`InputLayout.pad_with_mask` False) get batches of equal-length clips only (``group``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np
import torch

from isoscope.engine.arch.layout import ascending_noise, frames_for
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.extraction.tokenization import TokenizedCorpus, check_modality
from isoscope.engine.inputs.media import MediaItem, resample
from isoscope.engine.load.models import LoadedModel


@dataclass(frozen=True)
class MediaTokens(TokenizedCorpus):
    """A tokenized corpus of images or clips. ``input_ids`` hold the output-token indices (they set
    the lengths and padding of the batch plan); ``data`` the model's raw input per item (RGB
    pixels, or samples at the model's rate); ``names`` each item's token names; ``group`` (or
    None) the sample count a batch's clips must share (a model that must not pad them)."""

    data: tuple[np.ndarray, ...] = ()
    names: tuple[np.ndarray, ...] = ()
    notes: tuple[str, ...] = ()  # clips skipped for this model, by name


def is_media(items: Sequence[object]) -> TypeGuard[Sequence[MediaItem]]:
    return bool(items) and isinstance(items[0], MediaItem)


def prepare_media(loaded: LoadedModel, items: Sequence[MediaItem]) -> MediaTokens:
    """Per item: output-token indices, special mask, patch/frame index and names (module doc)."""
    layout = loaded.layout
    kind = "audio" if items[0].rate else "image"
    check_modality(loaded, kind)
    if kind == "image":
        count = int(layout.num_tokens or 0)
        prefix = len(layout.prefix)
        patch_names = np.array(layout.token_names(), dtype=str)
        is_special = np.arange(count) < prefix
        word = np.where(is_special, -1, np.arange(count) - prefix).astype(np.int32)
        data = tuple(item.data for item in items)
        patch_ids = [np.arange(count, dtype=np.int64) for _ in items]
        return MediaTokens(
            patch_ids,
            [is_special] * len(items),
            [word] * len(items),
            0,
            count,
            data=data,
            names=(patch_names,) * len(items),
        )
    rate = int(layout.sampling_rate or 0)
    data = tuple(resample(item.data, item.rate, rate) for item in items)
    notes: list[str] = []
    if layout.window_frames:  # Whisper: the extractor cuts a clip to its window, so do we
        window = layout.window_frames * int(layout.frame_stride or 1)
        cut = [item.path for item, d in zip(items, data, strict=True) if len(d) > window]
        data = tuple(d[:window] for d in data)
        if cut:
            notes.append(
                f"{len(cut)} clip(s) longer than the model's {window / rate:g} s window were cut "
                f"to it: {_shown(cut)}"
            )
    samples = np.array([len(d) for d in data], dtype=np.int64)
    frames = frames_for(loaded.encoder, samples, layout)
    stride = layout.frame_stride or max(1, int(samples.max() // max(1, frames.max())))
    ids: list[np.ndarray] = []
    special: list[np.ndarray] = []
    words: list[np.ndarray] = []
    names: list[np.ndarray] = []
    for n in frames:
        index = np.arange(int(n), dtype=np.int64)
        ids.append(index)
        special.append(np.zeros(int(n), dtype=bool))
        words.append(index.astype(np.int32))
        names.append(np.array([f"t={i * stride / rate:.2f}s" for i in index], dtype=str))
    short = [item.path for item, n in zip(items, frames, strict=True) if not n]
    if short:
        shortest = _shortest_clip(loaded, layout) / rate
        if len(short) == len(items):
            raise InputError(
                f"every clip is too short for this model's feature encoder (under "
                f"{shortest * 1000:g} ms gives no frame): {_shown(short, 5)}; give longer audio"
            )
        notes.append(
            f"{len(short)} clip(s) too short for this model (under {shortest * 1000:g} ms gives "
            f"no frame) were skipped: {_shown(short)}"
        )
    group = None if layout.pad_with_mask else samples
    return MediaTokens(
        ids,
        special,
        words,
        0,
        int(frames.max()),
        group=group,
        data=data,
        names=tuple(names),
        notes=tuple(notes),
    )


def _shown(names: list[str], most: int = 10) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _shortest_clip(loaded: LoadedModel, layout) -> int:
    """The fewest samples that give one output frame (the feature encoder's receptive field)."""
    low, high = 1, 1 << 20
    while low < high:  # frames_for is monotone in the sample count
        mid = (low + high) // 2
        if frames_for(loaded.encoder, np.array([mid]), layout)[0] > 0:
            high = mid
        else:
            low = mid + 1
    return low


def media_forward(
    loaded: LoadedModel, tokens: MediaTokens, rows: np.ndarray
) -> tuple[torch.Tensor, ...]:
    """One forward pass of the items ``rows``; the S (B, T, d) hidden states on the model's device."""
    layout = loaded.layout
    model = loaded.encoder
    extra: dict[str, torch.Tensor] = {}
    if layout.modality == "image":
        images = [as_pil(tokens.data[r]) for r in rows]
        pixels = loaded.processor(images=images, return_tensors="pt")["pixel_values"]
        pixels = pixels.to(loaded.device, loaded.dtype)
        if layout.fixed_noise:
            extra["noise"] = ascending_noise(model, len(rows), *pixels.shape[-2:])
        out = model(pixel_values=pixels, output_hidden_states=True, **extra)
        expected = layout.num_tokens
    elif layout.window_frames:  # Whisper: log-mel of the clip padded to the window, no mask
        clips = [tokens.data[r] for r in rows]
        features = loaded.processor(clips, sampling_rate=layout.sampling_rate, return_tensors="pt")[
            "input_features"
        ]
        out = model(
            input_features=features.to(loaded.device, loaded.dtype), output_hidden_states=True
        )
        expected = layout.window_frames
    else:
        clips = [tokens.data[r] for r in rows]
        if not layout.pad_with_mask and len({len(c) for c in clips}) > 1:
            raise ValueError("a batch of a no-padding audio model mixes clip lengths")  # a bug
        features = loaded.processor(
            clips,
            sampling_rate=layout.sampling_rate,
            padding=True,
            return_attention_mask=layout.pad_with_mask,
            return_tensors="pt",
        )
        if layout.pad_with_mask:
            extra["attention_mask"] = features["attention_mask"].to(loaded.device)
        values = features["input_values"].to(loaded.device, loaded.dtype)
        out = model(input_values=values, output_hidden_states=True, **extra)
        expected = int(max(len(tokens.input_ids[r]) for r in rows))
    hidden_states = list(getattr(out, "hidden_states", None) or ())
    if not hidden_states:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} ({loaded.info.architecture}) returns no hidden states"
        )
    if hidden_states[-1].shape[1] != expected:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} returned {hidden_states[-1].shape[1]} tokens per item, "
            f"expected {expected} from its layout ({layout.describe()})"
        )
    last = getattr(out, "last_hidden_state", None)
    if isinstance(last, torch.Tensor) and last.shape == hidden_states[-1].shape:
        hidden_states[-1] = last  # the final norm's output, as text models name state L
    if layout.window_frames:  # the window's padding frames past the longest clip of the batch
        longest = int(max(len(tokens.input_ids[r]) for r in rows))
        hidden_states = [h[:, :longest] for h in hidden_states]
    return tuple(hidden_states)


def as_pil(pixels: np.ndarray):
    """An RGB uint8 (H, W, 3) array as a PIL image: a processor guesses the channel axis of an
    array from its shape, and guesses wrong for a 1x1, 1xN or 3x3 image (channels first)."""
    from PIL import Image

    return Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8))


def model_view(loaded: LoadedModel, item: MediaItem) -> np.ndarray:
    """The image as the model sees it, uint8 (H, W, 3): the processor's resize and crop, its
    normalisation undone (``image_mean`` / ``image_std`` / ``rescale_factor`` of the processor),
    so that patch (r, c) covers pixels [r*p, (r+1)*p) x [c*p, (c+1)*p)."""
    processor = loaded.processor
    pixels = processor(images=[as_pil(item.data)], return_tensors="np")["pixel_values"][
        0
    ]  # (3, H, W)
    pixels = np.asarray(pixels, dtype=np.float64)
    if getattr(processor, "do_normalize", False):
        mean = np.asarray(getattr(processor, "image_mean", 0.0), dtype=np.float64).reshape(-1, 1, 1)
        std = np.asarray(getattr(processor, "image_std", 1.0), dtype=np.float64).reshape(-1, 1, 1)
        pixels = pixels * std + mean
    if getattr(processor, "do_rescale", False):
        pixels = pixels / float(getattr(processor, "rescale_factor", 1 / 255))
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8).transpose(1, 2, 0)


def patch_pixels(view: np.ndarray, grid: tuple[int, int], index: int) -> np.ndarray:
    """The pixels of patch ``index`` (row-major) of a :func:`model_view` image, (p_h, p_w, 3)."""
    rows, cols = grid
    height, width = view.shape[0] // rows, view.shape[1] // cols
    row, col = divmod(int(index), cols)
    return view[row * height : (row + 1) * height, col * width : (col + 1) * width]
