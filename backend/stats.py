"""Streaming per-dimension statistics of hidden states, exact and in float64, on the model's device.

:class:`RunningStats` accumulates with torch where the activations live (CPU, CUDA; see MPS
below), so a GPU run copies only per-batch reductions ((S, d) vectors) to the host, never the
hidden states. Batches and partial results merge with Chan et al.'s parallel update, so the result
equals the full-batch statistics (to float64 rounding) however the corpus is split or distributed,
and memory stays flat.

Per batch and hidden state, the (tokens, d) activations are cast to float64 on their device and
reduced with torch: a centred sum of squares (no sum-of-squares cancellation), ``abs().sum``,
``amin``/``amax`` and ``bincount`` of the per-token ``argmin``/``argmax`` (torch and numpy both
return the first index of a tie, so tie counts agree with numpy; on the CPU the argmin/argmax
runs in numpy on the same memory, ~10x faster than torch's there).

MPS has no float64: there the per-batch (tokens, d) activations of each state are moved to the CPU
(unified memory on Apple silicon, so this is cheap) and reduced and accumulated there in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from backend.device import to_numpy

_F64 = torch.float64


def accumulation_device(device: torch.device | str) -> torch.device:
    """Where float64 accumulators can live: the device itself, except MPS (no float64) -> CPU."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


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
        for s, x in enumerate(states):
            out._fill_state(s, x)
        return out

    def add_state(self, s: int, x: torch.Tensor) -> None:
        """Set state ``s`` of a fresh per-batch object from its (tokens, d) activations.

        For callers that stream a batch one hidden state at a time (so no (S, tokens, d) tensor
        ever exists); every state of the batch must have the same number of tokens.
        """
        if x.ndim != 2 or x.shape[1] != self.hidden_size:
            raise ValueError(f"state shape {tuple(x.shape)} != (tokens, {self.hidden_size})")
        if self.count == 0:
            self.count = int(x.shape[0])
        elif x.shape[0] != self.count:
            raise ValueError(f"state {s} has {x.shape[0]} tokens, the batch {self.count}")
        if x.shape[0]:
            self._fill_state(s, x)

    def _fill_state(self, s: int, x: torch.Tensor) -> None:
        """Reductions of one state's (n, d) activations, computed where x lives (CPU for MPS)."""
        if x.device.type == "mps":
            x = x.to("cpu")
        n, d = x.shape
        target = self.device
        x64 = x.to(_F64, copy=True)  # one float64 work copy, consumed in place below
        self._abs_sum[s] = x64.abs().sum(dim=0).to(target)
        mean = x64.sum(dim=0) / n
        self._mean[s] = mean.to(target)
        self._m2[s] = x64.sub_(mean).square_().sum(dim=0).to(target)  # centred: no cancellation
        del x64
        self._min[s] = x.amin(dim=0).to(_F64).to(target)
        self._max[s] = x.amax(dim=0).to(_F64).to(target)
        if x.device.type == "cpu":
            # numpy's argmin over the last axis is ~10x faster than torch's on the CPU (same rule:
            # the first index of a tie wins).
            values = to_numpy(x, dtype=None)
            argmin = torch.from_numpy(np.bincount(values.argmin(axis=1), minlength=d))
            argmax = torch.from_numpy(np.bincount(values.argmax(axis=1), minlength=d))
        else:
            argmin = torch.bincount(x.argmin(dim=1), minlength=d)
            argmax = torch.bincount(x.argmax(dim=1), minlength=d)
        self._argmin[s] = argmin.to(target)
        self._argmax[s] = argmax.to(target)

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
