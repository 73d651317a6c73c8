"""Streaming per-dimension statistics of hidden states, exact and in float64, on the model's device.

:class:`RunningStats` accumulates with torch where the activations live (CPU, CUDA; see MPS
below), so a GPU run copies only per-batch reductions ((S, d) vectors) to the host, never the
hidden states. Batches and partial results merge with Chan et al.'s parallel update, so the result
equals the full-batch statistics (to float64 rounding) however the corpus is split or distributed,
and memory stays flat.

Per batch, the (tokens, d) activations of a few consecutive hidden states at a time, as one
(g, tokens, d) tensor, are reduced to a centred float64 sum of squares (no sum-of-squares
cancellation), sum |x|, min and max, and a ``bincount`` of the per-token ``argmin``/``argmax``
(torch and numpy both return the first index of a tie). On the CPU this is :data:`MOMENTS`, the
compiled kernel of :mod:`isoscope.engine.extraction.kernel`, once it is warm, and until then its
eager twin :class:`EagerStates` (torch's float64 passes, numpy's extremes); elsewhere
:func:`moments` runs eagerly with torch on a reused float64 buffer (:class:`WorkBuffers`).

MPS has no float64: there the per-batch (tokens, d) activations of each state are moved to the CPU
(unified memory on Apple silicon, so this is cheap) and reduced and accumulated there in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from isoscope.engine.device import to_numpy
from isoscope.engine.extraction.kernel import MOMENTS, extreme_counts, state_extreme_counts

_F64 = torch.float64


class WorkBuffers:
    """Reusable per-batch scratch tensors (one per name, dtype and device), grown as needed.

    A fresh (tokens, d) temporary per hidden state and batch costs more than the arithmetic on
    the CPU: glibc hands blocks this large back to the OS when they are freed, so the next batch
    faults their pages in again, several times the cost of the reduction itself. Views of
    these buffers are valid until the next :meth:`take` of the same name.
    """

    def __init__(self) -> None:
        self._store: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def take(
        self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """A contiguous view of the buffer ``name`` with this shape (contents undefined)."""
        key = (name, dtype, torch.device(device))
        numel = math.prod(shape)
        buf = self._store.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=device)
            self._store[key] = buf
        return buf[:numel].view(shape)

    def ones(self, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A (1, n) row of ones, kept across batches (read it, never write it), so that no state
        pays for a fresh one."""
        key = ("ones", dtype, torch.device(device))
        buf = self._store.get(key)
        if buf is None or buf.numel() < n:
            buf = torch.ones(n, dtype=dtype, device=device)
            self._store[key] = buf
        return buf[:n].view(1, n)

    def clear(self) -> None:
        self._store.clear()


def accumulation_device(device: torch.device | str) -> torch.device:
    """Where float64 accumulators can live: the device itself, except MPS (no float64) -> CPU."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def moments(
    x: torch.Tensor, scratch: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per state and dimension of (g, n, d) activations, over the n tokens: the float64 mean,
    sum |x| and sum of squares about that mean (centred in float64: no cancellation), and the
    min and max (in x's dtype).

    The eager implementation for groups of states (GPU, MPS, and CPU groups in other dtypes or
    across devices until :data:`MOMENTS` is compiled; CPU states one at a time go through
    :class:`EagerStates`); pass ``scratch``, a (g, n, d) float64 buffer reused across batches,
    and the passes run in place on it.
    """
    if x.device.type == "cpu":
        return _moments_cpu(x, scratch)
    n = x.shape[1]

    def as_float64() -> torch.Tensor:
        return x.to(_F64, copy=True) if scratch is None else scratch.copy_(x)

    x64 = as_float64()
    mean = x64.sum(dim=1) / n
    abs_sum = x64.abs_().sum(dim=1)
    m2 = as_float64().sub_(mean.unsqueeze(1)).square_().sum(dim=1)
    return mean, abs_sum, m2, x.amin(dim=1), x.amax(dim=1)


def _moments_cpu(
    x: torch.Tensor, scratch: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`moments` on the CPU: one float64 copy and four passes over it, where the generic
    formulas take two copies and six passes (:func:`_float64_moments`), then torch's min and
    max. The copy is laid out (n, g * d), one row per token, so that each pass covers every
    state of the group in one call."""
    g, n, d = x.shape
    buf = x.new_empty((g, n, d), dtype=_F64) if scratch is None else scratch
    buf.view(n, g, d).copy_(x.transpose(0, 1))
    mean, abs_sum, m2 = _float64_moments(buf.view(n, g * d), torch.ones(1, n, dtype=_F64))
    return mean.view(g, d), abs_sum.view(g, d), m2.view(g, d), x.amin(dim=1), x.amax(dim=1)


def _float64_moments(
    x64: torch.Tensor, ones: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per column of (n, D) float64 values (C-contiguous; overwritten): the mean, sum |x| and
    sum of squares about the mean. ``ones``: a (1, n) float64 row of ones.

    torch's batch-norm statistics (``batch_norm_update_stats``: a vectorised pass for the mean,
    then one for the sum of squared deviations from it, in float64) and a (1, n) @ (n, D)
    product for sum |x|: one copy and four passes, where the generic formulas take two copies and
    six (docs/performance.md compares them).
    """
    mean, var = torch.batch_norm_update_stats(x64, None, None, 1.0)  # var: m2 / n
    abs_sum = ones @ x64.abs_()
    return mean, abs_sum[0], var.mul_(x64.shape[0])


def _extreme_counts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, d) int64 counts of the tokens of (g, n, d) ``x`` whose minimum / maximum lies in each
    dimension, where x lives (numpy's on the CPU: see
    :func:`isoscope.engine.extraction.kernel.extreme_counts`)."""
    g, _, d = x.shape
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        low_np, high_np = extreme_counts(to_numpy(x, dtype=None))
        return torch.from_numpy(low_np), torch.from_numpy(high_np)
    offsets = torch.arange(g, device=x.device).unsqueeze(1) * d
    low = torch.bincount((x.argmin(dim=2) + offsets).ravel(), minlength=g * d)
    high = torch.bincount((x.argmax(dim=2) + offsets).ravel(), minlength=g * d)
    return low.view(g, d), high.view(g, d)


class EagerStates:
    """The eager twin of :meth:`isoscope.engine.extraction.kernel.MomentsKernel.reduce_state`
    for one batch: :meth:`reduce` reduces the (n, d) CPU activations in ``x`` (float32 or
    float64, C-contiguous, n >= 1), refilled state by state by the caller, into row ``s`` of
    ``out`` (:meth:`RunningStats.state_rows`), with torch's propagation of NaN and infinity.
    ``buffers`` lend the float64 copy and the row of ones, once per batch.

    What reads the activations in their own dtype goes first, with numpy on this thread, while
    the state just gathered is still in the core's cache: the extreme-index counts
    (:func:`isoscope.engine.extraction.kernel.state_extreme_counts`), then each dimension's min and
    max (numpy's, which propagate NaN as torch's ``amin``/``amax`` do). The float64 copy and
    passes of :func:`_float64_moments` come last, since they push the state out of the cache.
    Everything is written straight into the rows. The caller writes the state's sampled rows
    before :meth:`reduce`, for the same reason.
    """

    def __init__(self, x: torch.Tensor, out: Sequence[np.ndarray], buffers: WorkBuffers) -> None:
        n, d = x.shape
        self.x, self.values, self.out = x, to_numpy(x, dtype=None), out
        self.x64 = buffers.take("x64", (n, d), _F64, x.device)
        self.ones = buffers.ones(n, _F64, x.device)
        self.extremes = np.empty((2, d), dtype=self.values.dtype)

    def reduce(self, s: int) -> None:
        """Reduce the activations now in ``x`` into row ``s``."""
        values, out = self.values, self.out
        state_extreme_counts(values, out[5][s], out[6][s])
        np.minimum.reduce(values, axis=0, out=self.extremes[0])
        np.maximum.reduce(values, axis=0, out=self.extremes[1])
        out[3][s], out[4][s] = self.extremes
        self.x64.copy_(self.x)
        for target, value in zip(out[:3], _float64_moments(self.x64, self.ones), strict=True):
            target[s] = to_numpy(value, dtype=None)


class RunningStats:
    """Accumulates, per hidden state and dimension: count, mean, M2, min, max, sum |x|, and how often
    each dimension holds a token's minimum / maximum (Luo et al.'s extreme-index counts).

    Arrays are shaped (num_states, hidden_size); feed batches shaped (num_states, tokens,
    hidden_size) as a numpy array or tensor, or as a sequence of ``num_states`` (tokens,
    hidden_size) tensors (one per hidden state, possibly on different devices). The public
    attributes (``mean``, ``variance``, ``min``, ``max``, ``mean_abs``, ``argmin_count``,
    ``argmax_count``) are numpy arrays (float64; int64 counts).
    """

    def __init__(
        self, num_states: int, hidden_size: int, device: torch.device | str = "cpu"
    ) -> None:
        self.num_states = int(num_states)
        self.hidden_size = int(hidden_size)
        self.device = accumulation_device(device)
        shape = (self.num_states, self.hidden_size)
        kw: dict[str, Any] = {"dtype": _F64, "device": self.device}
        self.count = 0
        self._mean = torch.zeros(shape, **kw)
        self._m2 = torch.zeros(shape, **kw)
        self._abs_sum = torch.zeros(shape, **kw)
        self._min = torch.full(shape, float("inf"), **kw)
        self._max = torch.full(shape, float("-inf"), **kw)
        self._argmin = torch.zeros(shape, dtype=torch.int64, device=self.device)
        self._argmax = torch.zeros(shape, dtype=torch.int64, device=self.device)

    # ------------------------------------------------------------------------- building

    @classmethod
    def from_batch(
        cls,
        batch: np.ndarray | torch.Tensor | Sequence[torch.Tensor],
        device: torch.device | str | None = None,
    ) -> RunningStats:
        """Statistics of one batch (see class doc for the accepted shapes), accumulated on
        ``device`` (default: the batch's device)."""
        if isinstance(batch, np.ndarray):
            if batch.ndim != 3:
                raise ValueError(f"batch shape {batch.shape} is not (states, tokens, hidden_size)")
            states = [torch.from_numpy(np.ascontiguousarray(x)) for x in batch]
        else:
            states = [torch.as_tensor(x) for x in batch]
        if not states:
            raise ValueError("a batch needs at least one hidden state")
        n, d = (states[0].shape[0], states[0].shape[1]) if states[0].ndim == 2 else (-1, -1)
        if any(x.ndim != 2 or x.shape != (n, d) for x in states):
            raise ValueError(
                f"batch states have shapes {[tuple(x.shape) for x in states]}; "
                "expected the same (tokens, hidden_size) for every state"
            )
        out = cls(len(states), d, device if device is not None else states[0].device)
        if n == 0:
            return out
        out.count = n
        buffers = WorkBuffers()
        for s, x in enumerate(states):
            out._fill_states(s, x.unsqueeze(0), buffers)
        return out

    def add_states(self, s0: int, x: torch.Tensor, buffers: WorkBuffers | None = None) -> None:
        """Set states ``s0 .. s0 + g - 1`` of a fresh per-batch object from their (g, tokens, d)
        activations (one tensor on one device).

        For callers that stream a batch a few hidden states at a time (so no (S, tokens, d)
        tensor need exist); every state of the batch must have the same number of tokens.
        ``buffers``: scratch space reused across calls (see :class:`WorkBuffers`).
        """
        if x.ndim != 3 or x.shape[2] != self.hidden_size or s0 < 0:
            raise ValueError(f"states shape {tuple(x.shape)} != (g, tokens, {self.hidden_size})")
        if s0 + x.shape[0] > self.num_states:
            raise ValueError(f"states {s0}..{s0 + x.shape[0] - 1} exceed {self.num_states}")
        if self.count == 0:
            self.count = int(x.shape[1])
        elif x.shape[1] != self.count:
            raise ValueError(f"states from {s0} have {x.shape[1]} tokens, the batch {self.count}")
        if x.shape[1] and x.shape[0]:
            self._fill_states(s0, x, buffers if buffers is not None else WorkBuffers())

    def _fill_states(self, s0: int, x: torch.Tensor, buffers: WorkBuffers) -> None:
        """Reductions of g states' (g, n, d) activations, computed where x lives (CPU for MPS).

        A few large operations over all g states rather than a dozen per state: on 2 CPU cores
        each operation's thread fork/join cost as much as the arithmetic of one small state.
        On the CPU, :data:`MOMENTS` (compiled) reduces them where it is warm; otherwise
        :func:`moments` runs eagerly on a reused float64 buffer.
        """
        if x.device.type == "mps":
            x = x.to("cpu")
        g, n, d = x.shape
        s1 = s0 + g
        if self.device.type == "cpu" and MOMENTS.reduce_into(x, self._rows(s0, s1)):
            return  # the compiled kernel wrote this batch's rows in place
        reduced = moments(x, buffers.take("x64", (g, n, d), _F64, x.device))
        targets: tuple[torch.Tensor, ...] = (
            self._mean,
            self._abs_sum,
            self._m2,
            self._min,
            self._max,
        )
        targets += (self._argmin, self._argmax)
        for target, value in zip(targets, reduced + _extreme_counts(x), strict=True):
            target[s0:s1].copy_(value)  # converts dtype and device (MPS: reduced on the CPU)

    def state_rows(self, count: int) -> tuple[np.ndarray, ...]:
        """The accumulators of a fresh per-batch object of ``count`` tokens per state, as the
        numpy views (CPU: shared memory) that
        :meth:`isoscope.engine.extraction.kernel.MomentsKernel.reduce_state` or its eager twin
        :class:`EagerStates` fills one state at a time; every state must be filled before the
        object is merged."""
        if self.device.type != "cpu" or self.count or count < 1:
            raise ValueError("state rows are for a fresh CPU batch of at least one token")
        self.count = int(count)
        return self._rows(0, self.num_states)

    def _rows(self, s0: int, s1: int) -> tuple[np.ndarray, ...]:
        """States ``s0 .. s1 - 1`` of the accumulators as numpy views (CPU: shared memory), in
        the order :meth:`isoscope.engine.extraction.kernel.MomentsKernel.reduce_into` fills."""
        names = ("_mean", "_abs_sum", "_m2", "_min", "_max", "_argmin", "_argmax")
        return tuple(to_numpy(getattr(self, name)[s0:s1], dtype=None) for name in names)

    def update(self, batch: np.ndarray | torch.Tensor | Sequence[torch.Tensor]) -> None:
        """Merge a batch of token vectors (see class doc for the accepted shapes)."""
        if isinstance(batch, np.ndarray | torch.Tensor):
            if (
                batch.ndim != 3
                or batch.shape[0] != self.num_states
                or batch.shape[2] != self.hidden_size
            ):
                raise ValueError(
                    f"batch shape {tuple(batch.shape)} != "
                    f"({self.num_states}, tokens, {self.hidden_size})"
                )
        self.merge(RunningStats.from_batch(batch, self.device))

    def merge(self, other: RunningStats) -> RunningStats:
        """Fold ``other`` into ``self`` (Chan et al.'s parallel update); returns ``self``."""
        if (other.num_states, other.hidden_size) != (self.num_states, self.hidden_size):
            raise ValueError(
                f"cannot merge statistics of shape ({other.num_states}, {other.hidden_size}) "
                f"into ({self.num_states}, {self.hidden_size})"
            )
        if other.count == 0:
            return self
        o = other.to(self.device)
        a, b = self.count, o.count
        total = a + b
        delta = o._mean - self._mean
        self._mean += delta * (b / total)
        self._m2 += o._m2 + delta**2 * (a * b / total)
        self.count = total
        self._abs_sum += o._abs_sum
        torch.minimum(self._min, o._min, out=self._min)
        torch.maximum(self._max, o._max, out=self._max)
        self._argmin += o._argmin
        self._argmax += o._argmax
        return self

    def to(self, device: torch.device | str) -> RunningStats:
        """A copy on ``device`` (``self`` when already there); e.g. ``.to("cpu")`` to ship it."""
        device = accumulation_device(device)
        if device == self.device:
            return self
        out = RunningStats(self.num_states, self.hidden_size, device)
        out.count = self.count
        for name in ("_mean", "_m2", "_abs_sum", "_min", "_max", "_argmin", "_argmax"):
            setattr(out, name, getattr(self, name).to(device))
        return out

    # ------------------------------------------------------------------------- results (numpy)

    @property
    def mean(self) -> np.ndarray:
        return to_numpy(self._mean)

    @property
    def m2(self) -> np.ndarray:
        return to_numpy(self._m2)

    @property
    def min(self) -> np.ndarray:
        return to_numpy(self._min)

    @property
    def max(self) -> np.ndarray:
        return to_numpy(self._max)

    @property
    def abs_sum(self) -> np.ndarray:
        return to_numpy(self._abs_sum)

    @property
    def argmin_count(self) -> np.ndarray:
        return to_numpy(self._argmin, dtype=None)

    @property
    def argmax_count(self) -> np.ndarray:
        return to_numpy(self._argmax, dtype=None)

    @property
    def variance(self) -> np.ndarray:
        """Population variance (ddof=0), shape (num_states, hidden_size)."""
        return to_numpy(self._m2 / max(self.count, 1))

    @property
    def mean_abs(self) -> np.ndarray:
        return to_numpy(self._abs_sum / max(self.count, 1))
