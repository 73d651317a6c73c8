"""Massive activations and high-norm tokens in vision Transformers, and the image under them.

- Sun, Chen, Kolter & Liu 2024 (arXiv 2402.17762, section 5) find the massive activations of
  LLMs in CLIP ViT-L and DINOv2-reg ViT-G too: a few values with |h| > 100 and ~1000 x the median,
  in fixed dims, carried by a few tokens (the register tokens of DINOv2-reg). The statistics are
  the decoder's (:class:`backend.analysis.activations.massive.MassiveAccumulator`); only the carriers
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

import numpy as np
import torch

from backend.analysis.activations.massive import MassiveAccumulator, MassiveStats
from backend.engine.device import to_numpy
from backend.engine.errors import InputError
from backend.engine.extraction.media import media_forward, prepare_media
from backend.engine.extraction.tokenization import plan_batches
from backend.engine.inputs import MediaItem
from backend.engine.layout import InputLayout
from backend.engine.models import LoadedModel
from backend.engine.naming import hidden_state_names
from backend.engine.progress import Progress
from backend.engine.stats import accumulation_device

IMAGE_CARRIERS = ("CLS", "distillation", "register", "patch")
HIGH_NORM_FACTOR = 2.0  # default high-norm rule: > 2 x the state's median patch norm (see below)


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

    def thresholds(self, factor: float = HIGH_NORM_FACTOR) -> np.ndarray:
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
    """Massive activations (exact median, as :func:`backend.analysis.activations.massive.scan_decoder`:
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
    num_states = loaded.info.num_layers + 1
    count = len(names)
    massive = MassiveAccumulator(num_states, accumulation_device(loaded.device))
    norms = np.zeros((num_states, len(items), count), dtype=np.float32)
    batches = plan_batches(tokens.lengths, batch_size)
    positions = np.arange(count, dtype=np.int64)
    done = 0
    with torch.inference_mode():
        for refine in (False, True):
            if refine:
                massive.begin_refine()
            for rows in batches:
                hidden = torch.stack(media_forward(loaded, tokens, rows))  # (S, B, T, d)
                flat = hidden.reshape(num_states, -1, hidden.shape[-1]).to(massive.device)
                if refine:
                    massive.refine(flat)
                else:
                    meta = np.column_stack(
                        [
                            np.repeat(rows, count),
                            np.tile(positions, len(rows)),
                            np.tile(positions, len(rows)),
                        ]
                    )
                    massive.update(flat, torch.from_numpy(meta))
                    norms[:, rows] = to_numpy(hidden.float().norm(dim=-1), dtype=torch.float32)
                done += len(rows)
                if progress is not None:
                    progress(done, 2 * len(items))
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
        grid=tuple(layout.grid),
        prefix=len(layout.prefix),
        seconds=time.perf_counter() - started,
    )
