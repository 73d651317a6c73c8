"""The CPU statistics kernel: a batch's float64 moments and extreme-index counts, compiled with
numba, and the copy of its sampled rows.

:data:`MOMENTS` reduces a (g, tokens, d) float32 or float64 CPU batch to what
:class:`isoscope.engine.extraction.stats.RunningStats` keeps per state and dimension: the float64
mean, sum |x|, centred sum of squares, the min and max, and how often each dimension holds a
token's minimum / maximum. The moments come from one compiled loop nest
(:func:`isoscope.engine.extraction.kernel_jit.moments_into`) and the extreme indices from numpy's
``argmin``/``argmax``, one state at a time, so that a state is read from memory once and its
second and third passes hit the core's cache. The token sample's rows of the same state are
copied by a compiled loop too (:meth:`MomentsKernel.copy_rows`).

Why not torch: eager torch makes a float64 copy and four memory-bound passes over it (see
:func:`isoscope.engine.extraction.stats.moments`), and inductor's fused kernel's speed depends
strongly on the CPU; one compiled loop nest per state reads the state once and keeps it in the
core's cache (the timings against both are in docs/performance.md, "The extraction engine").

One thread: the forward pass's OpenMP threads keep spinning for a while after each torch
operation, so splitting the kernel between threads, or running it beside the next forward pass,
takes cores that pass is using.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from isoscope.engine.device import to_numpy

_DTYPES: dict[torch.dtype, type[np.floating]] = {
    torch.float32: np.float32,
    torch.float64: np.float64,
}


def extreme_counts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For (g, n, d) activations: per state and dimension, how many of the n tokens have their
    minimum (first array) and maximum (second) in that dimension, as (g, d) int64.

    numpy takes the first index of a tie, as torch does, and its argmin over the last axis is
    vectorized over the contiguous dimensions, where torch's is not on the CPU.
    """
    g, _, d = values.shape
    low, high = np.empty((g, d), dtype=np.int64), np.empty((g, d), dtype=np.int64)
    for s in range(g):
        state_extreme_counts(values[s], low[s], high[s])
    return low, high


def state_extreme_counts(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> None:
    """:func:`extreme_counts` of one (n, d) state, written into the (d,) int64 rows ``low`` and
    ``high``. The loop over states calls it directly, with no states axis to shift and reshape."""
    d = values.shape[1]
    low[:] = np.bincount(values.argmin(axis=1), minlength=d)
    high[:] = np.bincount(values.argmax(axis=1), minlength=d)


class MomentsKernel:
    """The compiled batch reduction of CPU activations (see the module doc).

    Compiling costs most the first time on a machine and less once numba's disk cache holds it
    (docs/performance.md), so it never happens on a request's
    path by surprise: :meth:`compile` is called by the app's background warm-up, by
    :func:`isoscope.engine.extraction.extract_partial` for corpora big enough to repay it, and by
    the benchmark. Until then, and wherever the kernel does not apply (GPU and MPS, whose eager
    kernels are already fast; other dtypes; activations with a NaN or an infinity, whose
    propagation torch defines; a compiler that fails), callers reduce with torch eagerly
    (:func:`isoscope.engine.extraction.stats.moments`). ``ISOSCOPE_COMPILE=0`` turns it off.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._jit: Any = None  # the compiled module (kernel_jit), imported by compile()
        self.dtypes: set[torch.dtype] = set()
        self.seconds: dict[torch.dtype, float] = {}
        self.error: str | None = None
        self._suspended = 0

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Reduce eagerly with torch inside this block (benchmarks and tests compare both)."""
        self._suspended += 1
        try:
            yield
        finally:
            self._suspended -= 1

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("ISOSCOPE_COMPILE", "1").lower() not in ("0", "false", "no")

    def ready(self, dtype: torch.dtype = torch.float32) -> bool:
        return dtype in self.dtypes

    def compile(self, dtype: torch.dtype = torch.float32) -> float | None:
        """Compile for CPU activations of ``dtype`` (once per process); returns the seconds it
        took, 0.0 when it was ready, None when it is off, the dtype is not float32 or float64, or
        compiling failed (the reason in ``error``)."""
        with self._lock:
            if dtype in self.dtypes:
                return 0.0
            if not self.enabled() or self.error is not None or dtype not in _DTYPES:
                return None
            started = time.perf_counter()
            try:
                if self._jit is None:
                    import isoscope.engine.extraction.kernel_jit as kernel_jit

                    self._jit = kernel_jit
                _check(self._jit.moments_into, self._jit.copy_rows, _DTYPES[dtype])
            except Exception as exc:  # no numba, an unsupported platform: stay eager
                self.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
                return None
            seconds = time.perf_counter() - started
            self.seconds[dtype] = seconds
            self.dtypes.add(dtype)
            return seconds

    def applies(self, states: Sequence[torch.Tensor]) -> bool:
        """Whether :meth:`reduce_state` takes these tensors: all on the CPU, in a dtype it was
        compiled for, contiguous, and the kernel not suspended."""
        return not self._suspended and all(
            x.device.type == "cpu" and x.dtype in self.dtypes and x.is_contiguous() for x in states
        )

    def reduce_state(self, values: np.ndarray, s: int, out: Sequence[np.ndarray]) -> None:
        """Reduce one state's (n, d) activations (n >= 1; a numpy array of a compiled dtype,
        C-contiguous) into row ``s`` of ``out``: (S, d) numpy arrays, C-contiguous, for the
        mean, sum |x| and centred sum of squares (float64), the min and max (a float dtype) and
        the argmin and argmax counts (int64), written in place. A NaN or an infinity leaves
        row ``s`` undefined: check with :meth:`finite` and reduce eagerly where it fails.

        The moments read the state once from memory; argmin and argmax read it again while it
        is still in the core's cache."""
        mean, abs_sum, m2, lo, hi, argmin, argmax = out
        row = slice(s, s + 1)
        self._jit.moments_into(values[None], mean[row], abs_sum[row], m2[row], lo[row], hi[row])
        state_extreme_counts(values, argmin[s], argmax[s])

    @staticmethod
    def finite(out: Sequence[np.ndarray]) -> bool:
        """Whether the rows :meth:`reduce_state` wrote hold only finite values (their means are
        finite exactly when every reduced activation is)."""
        return bool(np.isfinite(out[0]).all())

    def copy_rows(
        self, src: np.ndarray, pick: np.ndarray, slots: np.ndarray, dst: np.ndarray
    ) -> bool:
        """``dst[slots] = src[pick]`` in one compiled pass (int64 indices, (n, d) ``src`` of a
        compiled dtype, (m, d) float32 ``dst``, both C-contiguous); False where the kernel does
        not apply (the caller copies with numpy)."""
        if (
            self._suspended
            or src.dtype not in [_DTYPES[t] for t in self.dtypes]
            or dst.dtype != np.float32
            or not (src.flags.c_contiguous and dst.flags.c_contiguous)
            or pick.dtype != np.int64
            or slots.dtype != np.int64
        ):
            return False
        self._jit.copy_rows(src, pick, slots, dst)
        return True

    def reduce_into(self, x: torch.Tensor, out: Sequence[np.ndarray]) -> bool:
        """Reduce a (g, n, d) CPU batch into ``out``: (g, d) numpy arrays as
        :meth:`reduce_state` fills them, one state at a time (a running total's own rows:
        nothing is allocated or copied per batch).

        Returns False where the kernel does not apply (contents of ``out`` then undefined): the
        caller reduces eagerly."""
        if x.ndim != 3 or 0 in x.shape or not self.applies([x]):
            return False
        values = to_numpy(x, dtype=None)  # the CPU tensor's own memory
        for s in range(values.shape[0]):  # one state at a time: its later passes hit the cache
            self.reduce_state(values[s], s, out)
        return self.finite(out)  # else a NaN or an infinity: torch's semantics decide


def _check(kernel, copy_rows, dtype: type[np.generic]) -> None:
    """Compile ``kernel`` (the moments) for ``dtype`` activations and float64 results, the
    signature :class:`isoscope.engine.extraction.stats.RunningStats` calls, and ``copy_rows`` for
    ``dtype`` rows into a float32 sample (or load both from numba's cache); check the moments
    against a float64 numpy reference on planted values (an offset dimension for the centred
    pass, a token count that four does not divide, a state of one token) and the copy against
    numpy's."""
    rng = np.random.default_rng(0)
    for shape in ((3, 17, 40), (2, 1, 5)):
        x = rng.standard_normal(shape).astype(dtype)
        x[:, :, 3] += 1e4
        x64 = x.astype(np.float64)
        got = [np.empty(shape[::2]) for _ in range(5)]
        kernel(x, *got)
        mean = x64.mean(axis=1)
        want = (mean, np.abs(x64).sum(axis=1), ((x64 - mean[:, None]) ** 2).sum(axis=1),
                x.min(axis=1), x.max(axis=1))  # fmt: skip
        for a, b in zip(got, want, strict=True):
            if not np.allclose(a, b, rtol=1e-12, atol=1e-9):
                raise RuntimeError("the compiled moments differ from numpy's")
    src = rng.standard_normal((5, 3)).astype(dtype)
    dst = np.zeros((4, 3), dtype=np.float32)
    copy_rows(src, np.array([4, 0], dtype=np.int64), np.array([1, 3], dtype=np.int64), dst)
    if not np.array_equal(dst[[1, 3]], src[[4, 0]].astype(np.float32)) or dst[[0, 2]].any():
        raise RuntimeError("the compiled row copy differs from numpy's")


MOMENTS = MomentsKernel()
