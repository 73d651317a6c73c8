"""What a model reads and how its output tokens map back to the input: :class:`InputLayout`.

Read from the model, never from its type name:

- the modality from the forward signature (``pixel_values``: image, ``input_values`` (a waveform)
  or ``input_features`` (a spectrogram, Whisper): audio, else text), never from which
  preprocessing files exist (Whisper ships a tokenizer for its decoder);
- for images, one traced forward pass of a blank image through the checkpoint's own processor
  gives the token count; the patch grid is the processed size over ``config.patch_size`` and the
  prefix tokens are the rest, named from the embedding module's parameters (``cls_token`` /
  ``class_embedding``: [CLS], ``distillation_token``: [DIST], ``register_tokens``: [REG1..n]);
- for audio, the frame stride is the product of the feature encoder's ``conv_stride`` and the
  rate the feature extractor's ``sampling_rate``; checkpoints whose feature extractor asks for no
  attention mask (group-norm wav2vec2 / HuBERT base) change their output when padded, so their
  batches only hold clips of one length (``pad_with_mask`` False);
- for spectrogram encoders (Whisper, Radford et al. 2022, arXiv 2212.04356), the frame stride is
  the feature extractor's ``hop_length`` times the product of the strides of the convolutions
  before the first block (Whisper: 160 x 1 x 2 = 320 samples, 20 ms at 16 kHz). The extractor pads
  every clip to its window (``n_samples``: 30 s), so the encoder always returns
  ``window_frames`` frames; a clip of n samples owns the frames whose centre sample lies inside
  it, ``ceil(n / frame_stride)`` (:func:`frames_for`), and the rest are padding, dropped like
  text padding;
- random patch masking (ViTMAE: a ``noise`` argument and ``config.mask_ratio``) is turned off:
  mask ratio 0 and a fixed ascending noise keep every patch, in order.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from isoscope.engine.device import to_numpy
from isoscope.engine.errors import UnsupportedModelError

MODALITIES = ("text", "image", "audio")
_PREFIX_PARAMS = (  # (parameter name ending, token name): the order the embeddings prepend them
    ("cls_token", "[CLS]"),
    ("class_embedding", "[CLS]"),
    ("distillation_token", "[DIST]"),
    ("register_tokens", "[REG]"),
)


@dataclass(frozen=True)
class InputLayout:
    """How output tokens map to the input. ``prefix``: names of the tokens before the patches;
    ``grid``: (rows, columns) of patches; ``image_size``: processed (height, width) in pixels;
    ``sampling_rate`` / ``frame_stride``: audio samples per second / per output frame."""

    modality: str = "text"
    prefix: tuple[str, ...] = ()
    grid: tuple[int, int] | None = None
    patch_size: int | None = None
    image_size: tuple[int, int] | None = None
    sampling_rate: int | None = None
    frame_stride: int | None = None
    pad_with_mask: bool = True
    window_frames: int | None = None  # spectrogram encoders: frames of the padded window (Whisper)
    fixed_noise: bool = False  # pass an ascending ``noise`` (random masking turned off)
    notes: tuple[str, ...] = field(default=())

    @property
    def num_tokens(self) -> int | None:
        """Tokens per image (prefix + patches); None for text and audio."""
        if self.grid is None:
            return None
        return len(self.prefix) + self.grid[0] * self.grid[1]

    @property
    def frames_per_second(self) -> float | None:
        if not self.sampling_rate or not self.frame_stride:
            return None
        return self.sampling_rate / self.frame_stride

    def token_names(self) -> list[str]:
        """Per output token of one image: the prefix names, then ``patch r{row}c{col}``."""
        rows, cols = self.grid or (0, 0)
        return list(self.prefix) + [f"patch r{r}c{c}" for r in range(rows) for c in range(cols)]

    def describe(self) -> str:
        """The model card's token-layout line."""
        if self.modality == "image" and self.grid:
            counts: dict[str, int] = {}
            for name in self.prefix:
                kind = name.strip("[]").rstrip("0123456789") or name
                counts[kind] = counts.get(kind, 0) + 1
            prefix = " + ".join(f"{n} {k}" for k, n in counts.items())
            patches = f"{self.grid[0]}x{self.grid[1]} patches of {self.patch_size} px"
            return f"{prefix} + {patches}" if prefix else patches
        if self.modality == "audio" and self.frames_per_second:
            if self.window_frames:
                window = self.window_frames / self.frames_per_second
                return (
                    f"{self.frames_per_second:g} frames per second (log-mel; every clip padded to "
                    f"{window:g} s, the frames past its end are left out)"
                )
            how = "padded with a mask" if self.pad_with_mask else "equal-length batches, no padding"
            return f"{self.frames_per_second:g} frames per second ({how})"
        if not self.pad_with_mask:
            return (
                "tokens of the tokenizer (padding moves this model's real tokens: batches of "
                "equal-length texts, no padding)"
            )
        return "tokens of the tokenizer"

    def input_size(self) -> str:
        if self.image_size:
            return f"{self.image_size[0]}x{self.image_size[1]} px"
        if self.sampling_rate:
            return f"{self.sampling_rate:,} Hz mono"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "modality": self.modality,
            "token_layout": self.describe(),
            "input_size": self.input_size(),
            "prefix_tokens": list(self.prefix),
            "patch_grid": list(self.grid) if self.grid else None,
            "frames_per_second": self.frames_per_second,
        }


def forward_parameters(model: torch.nn.Module) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return ()


def modality_of(model: torch.nn.Module) -> str:
    """``image`` / ``audio`` / ``text``, from the names the model's forward takes."""
    params = forward_parameters(model)
    if "pixel_values" in params:
        return "image"
    if "input_values" in params or "input_features" in params:
        return "audio"
    return "text"


def reads_spectrogram(model: torch.nn.Module) -> bool:
    """Whether the model reads ``input_features`` (a log-mel spectrogram: Whisper) rather than a
    waveform (``input_values``: wav2vec2, HuBERT)."""
    return "input_features" in forward_parameters(model)


def front_convolutions(model: torch.nn.Module) -> list[torch.nn.Conv1d]:
    """The 1-D convolutions before the first block (Whisper's conv1 / conv2), in module order."""
    blocks = [
        name
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) and name
    ]
    return [
        m
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Conv1d) and not any(name.startswith(b + ".") for b in blocks)
    ]


def conv_stride(model: torch.nn.Module) -> int:
    """Input frames per output frame of :func:`front_convolutions` (the product of their strides)."""
    return int(np.prod([int(c.stride[0]) for c in front_convolutions(model)] or [1]))


def feature_window(model: torch.nn.Module) -> int:
    """Input (mel) frames a spectrogram encoder requires: its position table's rows times the
    convolutions' stride (Whisper: 1500 x 2 = 3000, 30 s)."""
    positions = int(getattr(model.config, "max_source_positions", 0) or 0)
    return positions * conv_stride(model)


def read_layout(model: torch.nn.Module, processor: Any) -> InputLayout:
    """The :class:`InputLayout` of ``model`` read with its ``processor`` (module doc)."""
    modality = modality_of(model)
    if modality == "image":
        return _image_layout(model, processor)
    if modality == "audio":
        return _audio_layout(model, processor)
    return InputLayout()


def _prefix_names(model: torch.nn.Module) -> list[str]:
    names: list[str] = []
    params = dict(model.named_parameters())
    for ending, token in _PREFIX_PARAMS:
        found = [p for name, p in params.items() if name.split(".")[-1] == ending]
        if not found:
            continue
        if token == "[REG]":
            count = int(found[0].shape[-2]) if found[0].dim() >= 2 else 1
            names += [f"[REG{i + 1}]" for i in range(count)]
        elif token not in names:
            names.append(token)
    return names


def _image_layout(model: torch.nn.Module, processor: Any) -> InputLayout:
    if processor is None or not callable(processor):
        raise UnsupportedModelError(
            "this image model has no image processor next to its weights; save one "
            "(preprocessor_config.json) with the checkpoint"
        )
    config: Any = model.config
    notes: list[str] = []
    fixed_noise = "noise" in forward_parameters(model)
    if fixed_noise and float(getattr(config, "mask_ratio", 0.0) or 0.0) > 0:
        notes.append(
            f"random patch masking turned off (mask ratio {config.mask_ratio:g} -> 0, fixed noise)"
        )
        config.mask_ratio = 0.0
    blank = np.zeros((64, 64, 3), dtype=np.uint8)
    pixel_values = processor(images=[blank], return_tensors="pt")["pixel_values"]
    height, width = (int(s) for s in pixel_values.shape[-2:])
    with torch.inference_mode():
        extra = {}
        if fixed_noise:
            extra["noise"] = ascending_noise(model, 1, height, width)
        out = model(
            pixel_values=pixel_values.to(_device(model)), output_hidden_states=True, **extra
        )
    if not getattr(out, "hidden_states", None):
        raise UnsupportedModelError("this image model returns no hidden states")
    tokens = int(out.hidden_states[-1].shape[1])
    patch = _patch_size(config)
    prefix = _prefix_names(model)
    if patch:
        grid = (height // patch, width // patch)
    else:  # no patch size in the config: a square grid after the named prefix tokens
        side = math.isqrt(max(0, tokens - len(prefix)))
        grid = (side, side)
    extra_tokens = tokens - grid[0] * grid[1]
    if extra_tokens < 0:
        raise UnsupportedModelError(
            f"the model returns {tokens} tokens for a {height}x{width} image, fewer than its "
            f"{grid[0]}x{grid[1]} patches; isoscope reads ViT-style patch-token models"
        )
    if extra_tokens != len(prefix):
        prefix = [f"[PREFIX{i + 1}]" for i in range(extra_tokens)]
    return InputLayout(
        modality="image",
        prefix=tuple(prefix),
        grid=grid,
        patch_size=patch,
        image_size=(height, width),
        fixed_noise=fixed_noise,
        notes=tuple(notes),
    )


def _patch_size(config: Any) -> int | None:
    patch = getattr(config, "patch_size", None)
    if isinstance(patch, list | tuple):
        patch = patch[0]
    return int(patch) if patch else None


def _device(model: torch.nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def ascending_noise(model: torch.nn.Module, batch: int, height: int, width: int) -> torch.Tensor:
    """The fixed ``noise`` that keeps every patch in order under random masking (ViTMAE)."""
    patch = _patch_size(model.config) or 1
    count = (height // patch) * (width // patch)
    return torch.arange(count, dtype=torch.float32, device=_device(model)).expand(batch, count)


def _audio_layout(model: torch.nn.Module, processor: Any) -> InputLayout:
    rate = getattr(processor, "sampling_rate", None)
    if processor is None or not rate:
        raise UnsupportedModelError(
            "this audio model has no feature extractor with a sampling_rate next to its weights; "
            "save one (preprocessor_config.json) with the checkpoint"
        )
    if reads_spectrogram(model):
        return _spectrogram_layout(model, processor, int(rate))
    strides = getattr(model.config, "conv_stride", None)
    stride = int(np.prod(strides)) if strides else None
    group_norm = getattr(model.config, "feat_extract_norm", None) == "group"
    pad_with_mask = bool(getattr(processor, "return_attention_mask", False)) and not group_norm
    return InputLayout(
        modality="audio",
        sampling_rate=int(rate),
        frame_stride=stride,
        pad_with_mask=pad_with_mask,
    )


def _spectrogram_layout(model: torch.nn.Module, processor: Any, rate: int) -> InputLayout:
    """Whisper's layout (module doc): hop length from the feature extractor, stride from the
    convolutions, the window from the extractor's ``n_samples`` checked against the encoder's."""
    hop = int(getattr(processor, "hop_length", 0) or 0)
    window = int(getattr(processor, "n_samples", 0) or 0)
    if not hop or not window:
        raise UnsupportedModelError(
            "this spectrogram model's feature extractor has no hop_length / n_samples; save its "
            "own feature extractor (preprocessor_config.json) with the checkpoint"
        )
    stride = conv_stride(model)
    needed = feature_window(model)
    if needed and window // hop != needed:
        raise UnsupportedModelError(
            f"the feature extractor makes {window // hop} mel frames per clip but the encoder "
            f"takes {needed}; save the checkpoint's own feature extractor next to its weights"
        )
    return InputLayout(
        modality="audio",
        sampling_rate=rate,
        frame_stride=hop * stride,
        pad_with_mask=True,
        window_frames=(window // hop) // stride,
    )


def frames_for(
    model: torch.nn.Module, samples: np.ndarray, layout: InputLayout | None = None
) -> np.ndarray:
    """Output frames per clip of ``samples`` samples: for a spectrogram encoder (``layout.window_frames``
    set: Whisper) the frames whose centre sample lies inside the clip, ``ceil(n / frame_stride)``
    (frame j is centred on sample j * frame_stride), at most the window; else the model's own
    formula where it has one, else the convolution arithmetic of ``config.conv_kernel`` /
    ``conv_stride``."""
    samples = np.asarray(samples, dtype=np.int64)
    if layout is not None and layout.window_frames and layout.frame_stride:
        stride = int(layout.frame_stride)
        return np.minimum(-(-samples // stride), layout.window_frames).astype(np.int64)
    own = getattr(model, "_get_feat_extract_output_lengths", None)
    if callable(own):
        return np.asarray(own(torch.from_numpy(samples)), dtype=np.int64).reshape(samples.shape)
    lengths = samples.copy()
    kernels = getattr(model.config, "conv_kernel", ())
    strides = getattr(model.config, "conv_stride", ())
    for kernel, stride in zip(kernels, strides, strict=True):
        lengths = (lengths - kernel) // stride + 1
    return np.maximum(lengths, 0)


# ----------------------------------------------------------------------------- patch position table


@dataclass(frozen=True)
class PatchPositionTable:
    """The position embeddings an image model adds to its patches, read from its parameters.

    ``patches``: float64 (rows * cols, d), one row per patch in row-major order; ``prefix_rows``:
    table rows before the patches (ViT's [CLS] row; DeiT's [CLS] and [DIST]; DINOv2's registers
    get none); ``path``: the parameter's dotted name. Whether it was trained cannot be read from
    the parameter (ViTMAE's fixed sine-cosine table is one too, and a model built without its
    init holds zeros there: :attr:`is_zero`). ``interpolated_to``: the processed image's grid
    when the table has another one (the model resizes it on the fly; ``grid`` is the table's)."""

    patches: np.ndarray
    grid: tuple[int, int]
    prefix_rows: int
    path: str
    interpolated_to: tuple[int, int] | None = None

    @property
    def is_zero(self) -> bool:
        """Every patch row is zero: there is nothing to compare."""
        return not np.abs(self.patches).max(initial=0.0) > 0


def patch_position_table(model: torch.nn.Module, layout: InputLayout) -> PatchPositionTable | None:
    """The table of :class:`PatchPositionTable`, or None when the model adds none to its patches
    (BEiT's relative bias: :func:`position_scheme_note` says what it uses). A candidate is a
    parameter of ``hidden_size`` columns whose row count is the patch count plus at most the
    prefix tokens; among several the one named for positions wins (a register block can have
    the same shape on a tiny grid). Failing that, a parameter named for positions whose rows
    after at most the prefix count form a square grid is the table of another resolution that
    the model interpolates to the processed image's grid (DINOv2 keeps 37x37 for 518 px and
    reads 224 px images): it is returned on its own grid (``interpolated_to`` the layout's)."""
    if layout.modality != "image" or not layout.grid:
        return None
    patches = layout.grid[0] * layout.grid[1]
    width = int(getattr(model.config, "hidden_size", 0) or 0)
    candidates: list[tuple[bool, str, torch.nn.Parameter]] = []
    other_grid: list[tuple[str, torch.nn.Parameter, int]] = []
    for name, param in model.named_parameters():
        rows = param.reshape(-1, param.shape[-1]) if param.dim() >= 2 else None
        if rows is None or rows.shape[-1] != width or param.dim() > 2 and param.shape[0] != 1:
            continue
        count = int(rows.shape[0])
        if patches <= count <= patches + len(layout.prefix) and count >= 2:
            candidates.append(("position" in name.lower(), name, param))
        elif "position" in name.lower():
            sides = [
                math.isqrt(count - k)
                for k in range(min(len(layout.prefix), count - 4) + 1)
                if math.isqrt(count - k) ** 2 == count - k
            ]
            if sides:
                other_grid.append((name, param, sides[0]))
    if candidates:
        _, name, param = max(candidates, key=lambda c: c[0])  # stable: the first of the best
        grid, interpolated_to = layout.grid, None
    elif other_grid:
        name, param, side = other_grid[0]
        grid, interpolated_to = (side, side), layout.grid
    else:
        return None
    table = to_numpy(param).reshape(-1, width)  # float64
    count = grid[0] * grid[1]
    return PatchPositionTable(
        patches=table[-count:],
        grid=grid,
        prefix_rows=int(table.shape[0] - count),
        path=name.removesuffix(".weight"),
        interpolated_to=interpolated_to,
    )


def position_scheme_note(model: torch.nn.Module, layout: InputLayout) -> str:
    """What an image / audio model uses for position when it has no patch table, read from its
    parameters and config: a relative position bias in attention (BEiT), a convolutional
    relative position embedding (wav2vec2, HuBERT), or nothing found."""
    tables = [n for n, _ in model.named_parameters() if n.endswith("relative_position_bias_table")]
    if tables:
        where = (
            "one bias table shared by all layers" if len(tables) == 1 else "a bias table per layer"
        )
        return (
            "a learned relative position bias added to the attention logits "
            f"({where}), indexed by the offset between two patches: there is no absolute table "
            "to compare patch by patch"
        )
    kernel = getattr(model.config, "num_conv_pos_embeddings", None)
    if kernel:
        return (
            f"a convolutional relative position embedding (a grouped 1-D convolution of width "
            f"{int(kernel)} frames over the feature sequence, added before the first layer): "
            "position is made from each frame's neighbours, there is no table of positions"
        )
    if layout.modality == "audio":
        return "no position table among its parameters"
    return "no absolute position table among its parameters (it may use none, or a relative scheme)"
