"""Massive activations and high-norm tokens in vision Transformers, and the image under them.

- Sun, Chen, Kolter & Liu 2024 (arXiv 2402.17762, section 5) find the massive activations of
  LLMs in CLIP ViT-L and DINOv2-reg ViT-G too: a few values with |h| > 100 and ~1000 x the median,
  in fixed dims, carried by a few tokens (the register tokens of DINOv2-reg). The statistics are
  the decoder's (:class:`isoscope.analysis.massive.massive.MassiveAccumulator`); only the carriers
  differ: [CLS], distillation, register or patch tokens instead of first / delimiter / other.
- Darcet, Oquab, Mairal & Bojanowski 2024, *Vision Transformers Need Registers* (arXiv
  2309.16588): large ViTs grow a few **high-norm patch tokens** (L2 norm > ~150 at the output of
  ViT-L/g, about 2 % of the patches, in background areas) that hold global information; extra
  register tokens take that role and the patches become normal. Shown: the per-token L2 norm of
  every hidden state, the share of patches above a threshold, and the norms drawn over the image.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from isoscope.analysis.massive.massive import MassiveAccumulator, MassiveStats
from isoscope.analysis.massive.params import HIGH_NORM_FACTOR
from isoscope.engine.arch.layout import InputLayout
from isoscope.engine.budget.batching import plan_batches
from isoscope.engine.budget.progress import Progress
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError
from isoscope.engine.extraction.media import MediaTokens, media_forward, prepare_media
from isoscope.engine.extraction.stats import accumulation_device
from isoscope.engine.inputs.media import MediaItem
from isoscope.engine.load.models import LoadedModel
from isoscope.engine.naming import hidden_state_names

IMAGE_CARRIERS = ("CLS", "distillation", "register", "patch")
AUDIO_CARRIERS = ("first frame", "other frame")


def token_kind(name: str) -> str:
    """One of :data:`IMAGE_CARRIERS` for a token name of :meth:`InputLayout.token_names`."""
    if name.startswith("[REG"):
        return "register"
    if name == "[DIST]":
        return "distillation"
    if name.startswith("["):  # [CLS], or an unnamed [PREFIXn]
        return "CLS"
    return "patch"


@dataclass(frozen=True)
class ImageScan:
    """One pass of an image model over images.

    ``massive``: Sun et al.'s statistics per hidden state, carriers by :data:`IMAGE_CARRIERS`
    (``top_text`` is the image index, ``top_position`` the output-token index, ``top_token`` its
    name); ``norms``: float32 (S, images, T) L2 norm of every token; ``token_names`` (T,);
    ``grid``: (rows, cols); ``prefix``: tokens before the patches.
    """

    massive: MassiveStats
    norms: np.ndarray
    token_names: tuple[str, ...]
    grid: tuple[int, int]
    prefix: int
    seconds: float

    @property
    def n_images(self) -> int:
        return int(self.norms.shape[1])

    def patch_norms(self, state: int, image: int) -> np.ndarray:
        """(rows, cols) norms of one image's patches at ``state``."""
        return self.norms[state, image, self.prefix :].reshape(self.grid)

    def thresholds(self, factor: float = HIGH_NORM_FACTOR.default) -> np.ndarray:
        """(S,) high-norm thresholds: ``factor`` x each state's median patch norm. Darcet et al.'s
        150 is the output scale of ViT-L/g; a relative rule carries over to any width and layer."""
        if not factor > 1:
            raise InputError(f"the high-norm factor must be above 1, got {factor}")
        patches = self.norms[:, :, self.prefix :].reshape(self.norms.shape[0], -1)
        return factor * np.median(patches, axis=1).astype(np.float64)

    def high_norm_share(self, threshold: np.ndarray | float) -> np.ndarray:
        """(S,) share of patch tokens whose norm is above ``threshold`` (scalar or per state)."""
        patches = self.norms[:, :, self.prefix :].reshape(self.norms.shape[0], -1)
        limit = np.broadcast_to(np.asarray(threshold, dtype=np.float64), (patches.shape[0],))
        return (patches > limit[:, None]).mean(axis=1)

    def norm_by_kind(self) -> dict[str, np.ndarray]:
        """(S,) mean token norm per kind of token present (CLS / register / patch ...)."""
        kinds = np.array([token_kind(n) for n in self.token_names])
        return {
            kind: self.norms[:, :, kinds == kind].mean(axis=(1, 2))
            for kind in IMAGE_CARRIERS
            if (kinds == kind).any()
        }

    def top_patches(self, state: int, threshold: float, limit: int = 20) -> list[dict]:
        """The highest-norm patches of ``state`` above ``threshold``: image, row, column, norm."""
        patches = self.norms[state, :, self.prefix :]  # (images, rows * cols)
        order = np.argsort(-patches, axis=None, kind="stable")[:limit]
        out = []
        for flat in order:
            image, index = divmod(int(flat), patches.shape[1])
            if patches[image, index] <= threshold:
                break
            row, col = divmod(index, self.grid[1])
            out.append(
                {"image": image, "row": row, "column": col, "norm": float(patches[image, index])}
            )
        return out


def scan_images(
    loaded: LoadedModel,
    items: list[MediaItem] | tuple[MediaItem, ...],
    *,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> ImageScan:
    """Massive activations (exact median, as :func:`isoscope.analysis.massive.scan.scan_massive`:
    a second pass) and every token's norm, over ``items`` through the extraction's forward pass."""
    layout: InputLayout = loaded.layout
    if layout.modality != "image" or not layout.grid:
        raise InputError(
            f"{loaded.info.display_name} does not read images; the high-norm view needs a ViT-style "
            "image model"
        )
    if not items:
        raise InputError("give at least one image")
    started = time.perf_counter()
    tokens = prepare_media(loaded, list(items))
    names = layout.token_names()
    massive, norms = _scan_passes(loaded, tokens, batch_size, progress)
    stats = massive.finish(
        hidden_state_names(loaded.info.num_layers),
        lambda ids: [names[i] for i in ids],
        carrier_of=lambda position, token: token_kind(token),
        kinds=IMAGE_CARRIERS,
    )
    return ImageScan(
        massive=stats,
        norms=norms,
        token_names=tuple(names),
        grid=cast(tuple[int, int], tuple(layout.grid)),
        prefix=len(layout.prefix),
        seconds=time.perf_counter() - started,
    )


def _scan_passes(
    loaded: LoadedModel, tokens: MediaTokens, batch_size: int, progress: Progress | None
) -> tuple[MassiveAccumulator, np.ndarray]:
    """Two passes over the items through the extraction's forward (the second makes the median
    exact): the accumulator, and float32 (S, items, T) token norms, NaN past an item's own
    tokens (a clip's frames; every image has all of its tokens)."""
    num_states = loaded.info.num_layers + 1
    lengths = np.array([len(ids) for ids in tokens.input_ids], dtype=np.int64)
    massive = MassiveAccumulator(num_states, accumulation_device(loaded.device))
    norms = np.full((num_states, len(lengths), int(lengths.max())), np.nan, dtype=np.float32)
    batches = plan_batches(tokens.lengths, batch_size, group=tokens.group)  # no-padding clips
    done = 0
    with torch.inference_mode():
        for refine in (False, True):
            if refine:
                massive.begin_refine()
            for rows in batches:
                hidden = torch.stack(media_forward(loaded, tokens, rows))  # (S, B, T, d)
                own = (
                    torch.arange(hidden.shape[2])[None, :]
                    < torch.from_numpy(lengths[rows])[:, None]
                )
                flat = hidden[:, own.to(hidden.device)].to(massive.device)  # (S, N, d) own tokens
                if refine:
                    massive.refine(flat)
                else:
                    item, position = (
                        to_numpy(t, dtype=None) for t in torch.nonzero(own, as_tuple=True)
                    )
                    meta = np.column_stack([np.asarray(rows)[item], position, position])
                    massive.update(flat, torch.from_numpy(meta))
                    norm = to_numpy(hidden.float().norm(dim=-1), dtype=torch.float32)  # (S, B, T)
                    for b, row in enumerate(rows):
                        norms[:, row, : lengths[row]] = norm[:, b, : lengths[row]]
                done += len(rows)
                if progress is not None:
                    progress(done, 2 * len(lengths))
    return massive, norms


@dataclass(frozen=True)
class AudioScan:
    """One pass of a speech encoder over clips, over each clip's own frames only (a Whisper
    clip's padding frames past its end are left out, :mod:`isoscope.engine.arch.layout`).

    ``massive``: Sun et al.'s statistics per hidden state (``top_text`` the clip, ``top_position``
    the frame, ``top_token`` its start time; carriers :data:`AUDIO_CARRIERS`); ``norms``: float32
    (S, clips, T) L2 norm of every frame, NaN past a clip's ``frames``; ``frame_seconds``: the
    time step of one frame; ``waveforms``: each clip's samples at the model's ``sampling_rate``.
    """

    massive: MassiveStats
    norms: np.ndarray
    frames: np.ndarray
    frame_seconds: float
    sampling_rate: int
    waveforms: tuple[np.ndarray, ...]
    seconds: float
    notes: tuple[str, ...] = ()  # clips skipped for this model (too short), by name

    @property
    def n_clips(self) -> int:
        return int(self.norms.shape[1])

    def _own(self) -> np.ndarray:
        """(S, N) the norms of every clip's own frames."""
        own = ~np.isnan(self.norms[0])
        return self.norms[:, own]

    def thresholds(self, factor: float = HIGH_NORM_FACTOR.default) -> np.ndarray:
        """(S,) ``factor`` x each state's median frame norm (the image rule, on frames)."""
        if not factor > 1:
            raise InputError(f"the high-norm factor must be above 1, got {factor}")
        return factor * np.median(self._own(), axis=1).astype(np.float64)

    def high_norm_share(self, threshold: np.ndarray | float) -> np.ndarray:
        """(S,) share of the clips' own frames whose norm is above ``threshold``."""
        own = self._own()
        limit = np.broadcast_to(np.asarray(threshold, dtype=np.float64), (own.shape[0],))
        return (own > limit[:, None]).mean(axis=1)

    def frame_times(self, clip: int) -> np.ndarray:
        """(frames,) start time in seconds of each of a clip's own frames."""
        return np.arange(int(self.frames[clip])) * self.frame_seconds

    def top_frames(self, state: int, threshold: float, limit: int = 20) -> list[dict]:
        """The highest-norm frames of ``state`` above ``threshold``: clip, frame, time, norm."""
        norms = np.nan_to_num(self.norms[state], nan=-np.inf)  # (clips, T)
        order = np.argsort(-norms, axis=None, kind="stable")[:limit]
        out = []
        for flat in order:
            clip, frame = divmod(int(flat), norms.shape[1])
            if not norms[clip, frame] > threshold:
                break
            out.append(
                {
                    "clip": clip,
                    "frame": frame,
                    "time": round(frame * self.frame_seconds, 4),
                    "norm": float(norms[clip, frame]),
                }
            )
        return out


def frame_kind(position: int, token: str = "") -> str:
    """One of :data:`AUDIO_CARRIERS`: the clip's first frame (Sun et al.'s first token) or not."""
    return "first frame" if position == 0 else "other frame"


def scan_audio(
    loaded: LoadedModel,
    items: list[MediaItem] | tuple[MediaItem, ...],
    *,
    batch_size: int = 16,
    progress: Progress | None = None,
) -> AudioScan:
    """Massive activations (exact median, two passes) and every frame's norm over ``items``,
    each clip's own frames only, through the extraction's forward pass."""
    layout: InputLayout = loaded.layout
    if layout.modality != "audio":
        raise InputError(
            f"{loaded.info.display_name} does not read audio; the frame view needs a speech "
            "encoder (wav2vec2, HuBERT, Whisper)"
        )
    if not items:
        raise InputError("give at least one clip")
    started = time.perf_counter()
    tokens = prepare_media(loaded, list(items))
    massive, norms = _scan_passes(loaded, tokens, batch_size, progress)
    rate = int(layout.sampling_rate or 1)
    frames = np.array([len(ids) for ids in tokens.input_ids], dtype=np.int64)
    longest = tokens.names[int(frames.argmax())]  # frame i has one name in every clip: t=...
    samples = max(len(d) for d in tokens.data)
    stride = layout.frame_stride or max(1, samples // max(1, int(frames.max())))  # as prepare_media
    stats = massive.finish(
        hidden_state_names(loaded.info.num_layers),
        lambda ids: [str(longest[i]) for i in ids],
        carrier_of=frame_kind,
        kinds=AUDIO_CARRIERS,
    )
    return AudioScan(
        massive=stats,
        norms=norms,
        frames=frames,
        frame_seconds=stride / rate,
        sampling_rate=rate,
        waveforms=tuple(tokens.data),
        seconds=time.perf_counter() - started,
        notes=tokens.notes,
    )
