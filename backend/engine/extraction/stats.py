"""Streaming per-dimension statistics of hidden states, exact and in float64, on the model's device.

:class:`RunningStats` accumulates with torch where the activations live (CPU, CUDA; see MPS
below), so a GPU run copies only per-batch reductions ((S, d) vectors) to the host, never the
hidden states. Batches and partial results merge with Chan et al.'s parallel update, so the result
equals the full-batch statistics (to float64 rounding) however the corpus is split or distributed,
and memory stays flat.

Per batch, the (tokens, d) activations of a few consecutive hidden states at a time, as one
(g, tokens, d) tensor, are reduced with torch by :func:`moments`: a centred float64 sum of squares
(no sum-of-squares cancellation), sum |x|, min and max; then ``bincount`` of the per-token
``argmin``/``argmax`` (torch and numpy both return the first index of a tie, so tie counts agree
with numpy; on the CPU the argmin/argmax runs in numpy on the same memory, ~10x faster than
torch's there). On the CPU, :data:`MOMENTS` runs :func:`moments` compiled once it has been warmed
(one fused pass instead of eight memory-bound ones); elsewhere, and until then, it runs eagerly
on a reused float64 buffer (:class:`WorkBuffers`).

MPS has no float64: there the per-batch (tokens, d) activations of each state are moved to the CPU
(unified memory on Apple silicon, so this is cheap) and reduced and accumulated there in float64.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from backend.engine.device import to_numpy

_F64 = torch.float64


class WorkBuffers:
    """Reusable per-batch scratch tensors (one per name, dtype and device), grown as needed.

    A fresh (tokens, d) temporary per hidden state and batch costs more than the arithmetic on
    the CPU: glibc hands blocks this large back to the OS when they are freed, so the next batch
    faults their pages in again (measured: 2.9 ms against 0.7 ms per 736 x 384 state). Views of
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

    The one implementation of a batch's moments. Eagerly, pass ``scratch``, a (g, n, d) float64
    buffer reused across batches: the passes then run in place on it. :data:`MOMENTS` compiles
    this same function with ``scratch=None``, and inductor fuses the passes into a single read
    of x, with no float64 copy in memory.
    """
    n = x.shape[1]

    def as_float64() -> torch.Tensor:
        return x.to(_F64, copy=True) if scratch is None else scratch.copy_(x)

    x64 = as_float64()
    mean = x64.sum(dim=1) / n
    abs_sum = x64.abs_().sum(dim=1)
    # Copying again and subtracting in place is ~2x faster eagerly than one mixed-dtype
    # torch.sub(x, mean, out=x64) on the CPU.
    m2 = as_float64().sub_(mean.unsqueeze(1)).square_().sum(dim=1)
    return mean, abs_sum, m2, x.amin(dim=1), x.amax(dim=1)


class MomentsKernel:
    """:func:`moments` compiled with ``torch.compile`` (inductor, dynamic shapes) for CPU
    activations of the dtypes it was warmed for.

    On 2 CPU cores the eager passes are memory-bound: 3.6 ms for a 7 x 740 x 384 float32 batch
    against 0.45 ms compiled (benchmarks/extract.py has the in-pipeline figures). Compiling costs
    seconds (1.5-3.5 s with inductor's disk cache warm, up to ~25 s on a fresh machine), so it
    never happens on a request's path by surprise: :meth:`compile` is called by the app's
    background warm-up, by :func:`backend.engine.extraction.extract_partial` for corpora big enough to
    repay it, and by the benchmark. Until then, and wherever the compiled kernel does not apply
    (GPU and MPS, whose eager kernels are already fast; other dtypes; a state group or batch of
    one, which dynamic shapes specialise; a compiler that fails), :func:`moments` runs eagerly.
    A call never compiles: a shape the compiled code does not cover runs eagerly instead.
    ``ISOSCOPE_COMPILE=0`` turns it off.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._fn = None
        self.dtypes: set[torch.dtype] = set()
        self.seconds: dict[torch.dtype, float] = {}
        self.error: str | None = None
        self._suspended = 0

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Run :func:`moments` eagerly inside this block (benchmarks and tests compare both)."""
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
        took, 0.0 when it was ready, None when it is off or failed (the reason in ``error``)."""
        with self._lock:
            if dtype in self.dtypes:
                return 0.0
            if not self.enabled() or self.error is not None or not dtype.is_floating_point:
                return None
            started = time.perf_counter()
            try:
                import torch._inductor.config as inductor_config

                # In-process compilation: no pool of worker processes for one small kernel.
                inductor_config.compile_threads = 1
                if self._fn is None:
                    self._fn = torch.compile(moments, dynamic=True)
                # Sizes 0 and 1 are specialised by dynamic shapes; warm with general ones, for
                # ordinary tensors and for inference tensors (what extraction makes), whose
                # dispatch keys differ.
                x = torch.linspace(-3, 3, 3 * 17 * 40).reshape(3, 17, 40).to(dtype)
                with torch.inference_mode():
                    want = moments(x, torch.empty(x.shape, dtype=_F64))
                    for tensor in (x, x.clone()):
                        got = self._fn(tensor.view(tensor.shape))
                        for a, b in zip(got, want, strict=True):
                            if not torch.allclose(a.to(_F64), b.to(_F64), rtol=1e-12, atol=1e-12):
                                raise RuntimeError(
                                    "the compiled moments differ from the eager ones"
                                )
            except Exception as exc:  # no compiler, an unsupported platform: stay eager
                self.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
                return None
            seconds = time.perf_counter() - started
            self.seconds[dtype] = seconds
            self.dtypes.add(dtype)
            return seconds

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
        """The compiled moments of x, or None where they do not apply (the caller runs
        :func:`moments` eagerly)."""
        if (
            x.dtype not in self.dtypes
            or self._suspended
            or x.device.type != "cpu"
            or x.ndim != 3
            or x.shape[0] < 2
            or x.shape[1] < 2
            or not x.is_contiguous()
        ):
            return None
        with self._lock:
            try:
                with torch.compiler.set_stance("fail_on_recompile"), torch.inference_mode():
                    # Always a view, as when compiled: dynamo guards on whether x is one.
                    return self._fn(x.view(x.shape))
            except Exception:  # a guard the compiled code does not cover: eager this time
                return None


MOMENTS = MomentsKernel()


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
        kw = {"dtype": _F64, "device": self.device}
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
        states = [torch.as_tensor(x) for x in batch] if not isinstance(batch, np.ndarray) else None
        if states is None:
            if batch.ndim != 3:
                raise ValueError(f"batch shape {batch.shape} is not (states, tokens, hidden_size)")
            states = [torch.from_numpy(np.ascontiguousarray(x)) for x in batch]
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

    def add_state(self, s: int, x: torch.Tensor, buffers: WorkBuffers | None = None) -> None:
        """:meth:`add_states` for one state's (tokens, d) activations."""
        if x.ndim != 2:
            raise ValueError(f"state shape {tuple(x.shape)} != (tokens, {self.hidden_size})")
        self.add_states(s, x.unsqueeze(0), buffers)

    def _fill_states(self, s0: int, x: torch.Tensor, buffers: WorkBuffers) -> None:
        """Reductions of g states' (g, n, d) activations, computed where x lives (CPU for MPS).

        A few large operations over all g states rather than a dozen per state: on 2 CPU cores
        each operation's thread fork/join cost as much as the arithmetic of one small state.
        The float64 moments come from :data:`MOMENTS` (compiled) where it is warm, else from
        :func:`moments` run eagerly on a reused float64 buffer.
        """
        if x.device.type == "mps":
            x = x.to("cpu")
        g, n, d = x.shape
        s1, target = s0 + g, self.device
        fused = MOMENTS(x)
        mean, abs_sum, m2, lo, hi = (
            fused
            if fused is not None
            else moments(x, buffers.take("x64", (g, n, d), _F64, x.device))
        )
        self._mean[s0:s1] = mean.to(target)
        self._abs_sum[s0:s1] = abs_sum.to(target)
        self._m2[s0:s1] = m2.to(target)
        self._min[s0:s1] = lo.to(_F64).to(target)
        self._max[s0:s1] = hi.to(_F64).to(target)
        # Which dimension holds each token's minimum / maximum, counted per state: one bincount
        # over (state, dimension) pairs. Torch and numpy both take the first index of a tie;
        # numpy's argmin over the last axis is ~10x faster than torch's on the CPU (and than a
        # compiled one: 0.7 against 1.9 ms for a 7 x 740 x 384 batch).
        if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
            values = to_numpy(x, dtype=None)
            shift = np.arange(g)[:, None] * d
            argmin = np.bincount((values.argmin(axis=2) + shift).ravel(), minlength=g * d)
            argmax = np.bincount((values.argmax(axis=2) + shift).ravel(), minlength=g * d)
            argmin, argmax = torch.from_numpy(argmin), torch.from_numpy(argmax)
        else:
            offsets = torch.arange(g, device=x.device).unsqueeze(1) * d
            argmin = torch.bincount((x.argmin(dim=2) + offsets).ravel(), minlength=g * d)
            argmax = torch.bincount((x.argmax(dim=2) + offsets).ravel(), minlength=g * d)
        self._argmin[s0:s1] = argmin.view(g, d).to(target)
        self._argmax[s0:s1] = argmax.view(g, d).to(target)

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
