"""One hidden state of every analysed token, spilled to a float32 file (projections at
corpus scale).

An extraction keeps streaming statistics and a token sample, never every vector. To project all
tokens of ONE state, :func:`spill_state` runs a second pass over the corpus and writes that
state's vectors, row ``i`` = row ``i`` of ``result.tokens`` (text order, then position), to a raw
float32 file of shape (n, d). Memory stays bounded by one batch: the other states of each
forward pass are dropped on the device. :class:`SpilledState` reads the file back in chunks with
plain ``readinto`` (not a memory map, whose touched pages would count as the process's memory)
and gathers a few chosen rows (landmarks, a fit sample).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from isoscope.engine.budget.batching import batch_count, equal_run, length_order
from isoscope.engine.budget.progress import Progress, report
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError
from isoscope.engine.extraction.forward import forward_hidden_states, pad_batch, pad_token_id
from isoscope.engine.extraction.tokenization import tokenize
from isoscope.engine.extraction.types import ExtractionResult
from isoscope.engine.load.models import LoadedModel

CHUNK_ROWS = 32_768  # rows per read of a spilled file: 48 MiB of float32 at d = 384


class Cancelled(Exception):
    """The caller's ``progress`` asked to stop; the partial file was removed."""


@dataclass(frozen=True)
class SpilledState:
    """A float32 (rows, dim) file of one hidden state's vectors, in ``result.tokens`` order."""

    path: Path
    rows: int
    dim: int
    state: int

    def chunks(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(first row, float32 (c, dim) block)`` over the whole file, in order."""
        buffer = np.empty((chunk_rows, self.dim), dtype=np.float32)
        with open(self.path, "rb") as handle:
            start = 0
            while start < self.rows:
                count = min(chunk_rows, self.rows - start)
                view = buffer[:count]
                got = handle.readinto(view.data.cast("B"))
                if got != view.nbytes:
                    raise OSError(f"{self.path} is shorter than {self.rows} rows")
                yield start, view
                start += count

    def take(self, rows: np.ndarray) -> np.ndarray:
        """float32 (len(rows), dim) copy of the given rows (any order)."""
        mapped = np.memmap(self.path, dtype=np.float32, mode="r", shape=(self.rows, self.dim))
        try:
            return np.array(mapped[np.asarray(rows, dtype=np.int64)])
        finally:
            del mapped


def spill_state(
    loaded: LoadedModel,
    result: ExtractionResult,
    state: int,
    path: str | Path,
    *,
    progress: Progress | None = None,
) -> SpilledState:
    """Run ``loaded`` over ``result``'s texts again and write state ``state`` of every analysed
    token to ``path`` (module doc). The model and settings must be the extraction's: the rows
    are checked against ``result.tokens``. ``progress(done texts, total)`` may return False to
    stop (:class:`Cancelled`)."""
    if (result.extra or {}).get("inputs", {}).get("kind", "text") != "text":
        raise InputError("projections of every token are for text corpora; use the token sample")
    if loaded.fingerprint != result.model_fingerprint:
        raise InputError("the loaded model is not the one this extraction ran; reload it first")
    if not 0 <= state < result.num_states:
        raise InputError(
            f"no hidden state {state}; this model has states 0..{result.num_states - 1}"
        )
    settings, d = result.settings, result.hidden_size
    tokenized = tokenize(loaded, tuple(result.texts), settings.max_length)
    include = tokenized.analysed(settings.exclude_special, settings.exclude_first)
    counts = np.array([int(m.sum()) for m in include], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(counts)])
    total = int(offset[-1])
    if total != result.num_tokens:
        raise InputError(
            f"the second pass found {total:,} tokens, the extraction {result.num_tokens:,}; "
            "the model or tokenizer changed since the extraction: run it again"
        )
    positions = [np.flatnonzero(m) for m in include]
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _not_written(exc, path) from None
    partial = path.with_name(f"{path.name}.part{os.getpid()}")
    order = length_order(tokenized.lengths, tokenized.group)
    pad_id = pad_token_id(loaded)
    start, done = 0, len(result.texts) - len(order)
    row_bytes = d * 4
    # Written with pwrite, not through a memory map: a map's dirty pages count as our memory.
    fd = -1
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.ftruncate(fd, total * row_bytes)
        with torch.inference_mode():
            while start < len(order):
                width = int(tokenized.lengths[order[start]])
                count = batch_count(
                    width, len(order) - start, settings.batch_size, settings.token_budget
                )
                if tokenized.group is not None:  # a model that must not be padded
                    count = equal_run(tokenized.group, order, start, count)
                rows = order[start : start + count]
                ids, mask = pad_batch(tokenized, rows, pad_id)
                hidden = forward_hidden_states(loaded, ids, mask)[state]  # (B, T, d)
                flat = np.concatenate([r * width + positions[t] for r, t in enumerate(rows)])
                picked = hidden.reshape(-1, d)[torch.from_numpy(flat).to(hidden.device)]
                block = to_numpy(picked, torch.float32)
                at = 0
                for t in rows:  # each text's analysed tokens are contiguous rows of the file
                    os.pwrite(fd, block[at : at + counts[t]].tobytes(), int(offset[t]) * row_bytes)
                    at += counts[t]
                start += count
                done += count
                if not report(progress, done, len(result.texts)):
                    raise Cancelled(f"stopped after {done:,} of {len(result.texts):,} texts")
        os.close(fd)
        fd = -1
        os.replace(partial, path)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only folder holds no part either
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            raise _not_written(exc, path) from None
        raise
    return SpilledState(path, total, d, state)


# Why a spill could not be written, by errno: a full disk, a quota, a read-only or a forbidden folder
STORAGE_ERRNOS = {
    errno.ENOSPC: "the disk holding it is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "it is on a read-only file system",
    errno.EACCES: "it is not writable (permission denied)",
    errno.EPERM: "it is not writable (permission denied)",
}


def _not_written(exc: OSError, path: Path) -> InputError:
    """One actionable line for a spill the cache folder cannot take (the analysis already shown
    stays: only this projection of every token is not made)."""
    why = STORAGE_ERRNOS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return InputError(
        f"every token of this state is written to {str(path.parent)!r} first (to project or "
        f"export every token), "
        f"but {why}; free space there or set ISOSCOPE_CACHE_DIR to a writable folder with room "
        "(or project the token sample instead); the other results are unaffected"
    )
