"""The token sample: a seeded hash priority per token (:func:`token_priority`) and the ``limit``
lowest-priority tokens with their vectors (:class:`SampleCandidates`); independent of batching and
of how the corpus is split across processes."""

from __future__ import annotations

import math
import mmap

import numpy as np
import torch

from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError
from isoscope.engine.extraction.kernel import MOMENTS
from isoscope.engine.extraction.types import ExtractionSettings

_U64 = np.uint64
_POSITION_BITS = 16  # positions < 65,536 (max_length <= 8192); text ids < 2**48


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 of uint64 values (Steele et al. 2014); a bijection of the 64-bit integers."""
    z = np.asarray(x, dtype=_U64) + _U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def token_priority(seed: int, text_id: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Sampling priority of tokens: seeded splitmix64 of (text index, position), uint64.

    Distinct (text, position) pairs get distinct priorities (the hash is a bijection of the packed
    key), so "the k smallest" is one well-defined set however tokens are batched or split.
    """
    salt = _splitmix64(np.array([seed % (1 << 64)], dtype=_U64))[0]
    key = (np.asarray(text_id).astype(_U64) << _U64(_POSITION_BITS)) | np.asarray(position).astype(
        _U64
    )
    return _splitmix64(key ^ salt)


def token_key(text_id: np.ndarray, position: np.ndarray) -> np.ndarray:
    return (np.asarray(text_id, dtype=np.int64) << _POSITION_BITS) | np.asarray(
        position, dtype=np.int64
    )


def sample_limit(settings: ExtractionSettings, num_states: int, hidden_size: int) -> int:
    """Tokens kept per state: ``sample_size``, capped so S * k * d * 4 bytes fit the budget."""
    per_token = num_states * hidden_size * 4
    fits = settings.sample_budget_bytes // per_token
    if fits < 2:
        raise InputError(
            f"the token-sample memory budget ({bytes_label(settings.sample_budget_bytes)}) holds "
            f"fewer than 2 tokens of this model ({num_states} states x {hidden_size} dims x 4 "
            "bytes per token); raise the budget"
        )
    return int(min(settings.sample_size, fits))


def bytes_label(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _zeros(shape: tuple[int, ...], dtype: type[np.generic]) -> np.ndarray:
    """``np.zeros`` for a large buffer that will be written whole: its pages faulted in at once.

    numpy asks the kernel for transparent huge pages on large arrays; where the kernel compacts
    memory to serve them on first touch (``defrag=madvise``, Debian's default), writing a large
    sample costs several times what an anonymous ``mmap`` with ``MAP_POPULATE`` does
    (4 KiB pages, faulted in by the kernel in one call). Elsewhere (no MAP_POPULATE, small
    buffers, a refused mapping) this is ``np.zeros``.
    """
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if nbytes < 1 << 22 or not populate:
        return np.zeros(shape, dtype=dtype)
    try:
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    except (OSError, ValueError):
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class SampleCandidates:
    """The ``limit`` tokens with the smallest priorities seen so far, with their vectors.

    Fixed slots, filled either up front (:meth:`planned`, the extraction: every token is known
    before the forward passes) or by streaming (:meth:`select`/:meth:`commit`, O(limit + batch)
    host work, copying only the vectors of tokens that enter; the Ray engine's cut-offs).
    ``priority``/``text_id``/``position``/``vectors`` (S, m, d) float32 expose the filled
    entries (unordered).
    """

    def __init__(self, limit: int, num_states: int, hidden_size: int, capacity: int | None = None):
        self.limit = int(limit)
        self.num_states = int(num_states)
        self.hidden_size = int(hidden_size)
        cap = self.limit if capacity is None else int(min(capacity, self.limit))
        self._priority = np.zeros(cap, dtype=_U64)
        self._filled = np.zeros(cap, dtype=bool)
        self._text_id = np.zeros(cap, dtype=np.int64)
        self._position = np.zeros(cap, dtype=np.int32)
        self._vectors = _zeros((self.num_states, cap, self.hidden_size), np.float32)

    @classmethod
    def planned(
        cls,
        limit: int,
        num_states: int,
        hidden_size: int,
        priority: np.ndarray,
        text_id: np.ndarray,
        position: np.ndarray,
    ) -> tuple[SampleCandidates, np.ndarray]:
        """The sample of a part whose tokens are all known before any forward pass.

        Priorities depend only on (seed, text, position), so the ``limit`` lowest of the part's
        tokens (``priority``/``text_id``/``position``, one entry per token) are the sample that
        streaming :meth:`select`/:meth:`commit` would end with. Their slots are assigned up front
        in (text, position) order, so each batch writes a sampled token's vectors once, straight
        into its final slot (:meth:`write`), and :meth:`ordered` has nothing to move.

        Returns the object (metadata filled, vectors zero until written) and ``slot``: int64 per
        offered token, its slot or -1 if it is not sampled.
        """
        n = len(priority)
        m = min(int(limit), n)
        chosen = np.arange(n)
        if m < n:
            chosen = np.argpartition(priority, m - 1)[:m]
        chosen = chosen[np.argsort(token_key(text_id[chosen], position[chosen]), kind="stable")]
        out = cls(limit, num_states, hidden_size, capacity=m)
        out._priority[:] = priority[chosen]
        out._text_id[:] = text_id[chosen]
        out._position[:] = position[chosen]
        out._filled[:] = True
        slot = np.full(n, -1, dtype=np.int64)
        slot[chosen] = np.arange(m)
        return out, slot

    def write(
        self,
        s0: int,
        slots: np.ndarray,
        vectors: np.ndarray | torch.Tensor,
        pick: np.ndarray | None = None,
    ) -> None:
        """Store the (g, n, d) vectors of planned tokens (see :meth:`planned`) for states
        ``s0 .. s0 + g - 1``: rows ``pick`` (int64) of each state go to ``slots``; without
        ``pick``, all n rows in order (n = len(slots)).

        With ``pick``, float32 and float64 rows on the CPU are copied by the compiled kernel
        where it is warm (:meth:`isoscope.engine.extraction.kernel.MomentsKernel.copy_rows`),
        with no gathered copy in between; until then float32 rows by torch's ``index_select``
        and ``index_copy_`` on all cores, which beats numpy's fancy indexing where most tokens
        are sampled (docs/performance.md)."""
        if isinstance(vectors, torch.Tensor):
            keep = vectors.device.type == "cpu" and vectors.dtype in (torch.float32, torch.float64)
            vectors = to_numpy(vectors, dtype=None if keep else torch.float32)
        for j, state in enumerate(vectors):
            target = self._vectors[s0 + j]
            if pick is None:
                target[slots] = state
            elif MOMENTS.copy_rows(state, pick, slots, target):
                continue
            elif state.dtype == target.dtype:
                rows = torch.from_numpy(state).index_select(0, torch.from_numpy(pick))
                torch.from_numpy(target).index_copy_(0, torch.from_numpy(slots), rows)
            else:
                target[slots] = state[pick]

    def __len__(self) -> int:
        return int(self._filled.sum())

    @property
    def capacity(self) -> int:
        return len(self._filled)

    def _rows(self) -> np.ndarray:
        return np.flatnonzero(self._filled)

    @property
    def priority(self) -> np.ndarray:
        return self._priority[self._rows()]

    @property
    def text_id(self) -> np.ndarray:
        return self._text_id[self._rows()]

    @property
    def position(self) -> np.ndarray:
        return self._position[self._rows()]

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[:, self._rows(), :]

    def select(self, priority: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which offered tokens enter and which slots they evict; changes nothing.

        Returns ``(entering, evicted_slots)``: indices into ``priority`` and slot numbers.
        """
        free = int((~self._filled).sum())
        if len(priority) <= free:
            return np.arange(len(priority)), np.zeros(0, dtype=np.int64)
        occupied = self._rows()
        candidates = np.arange(len(priority))
        if free == 0:  # only priorities below the current largest can enter
            candidates = np.flatnonzero(priority < self._priority[occupied].max())
            if not candidates.size:
                return candidates, np.zeros(0, dtype=np.int64)
        pool = np.concatenate([self._priority[occupied], priority[candidates]])
        keep = np.argpartition(pool, self.capacity - 1)[: self.capacity]
        is_new = keep >= len(occupied)
        entering = candidates[keep[is_new] - len(occupied)]
        kept_old = np.zeros(len(occupied), dtype=bool)
        kept_old[keep[~is_new]] = True
        return np.sort(entering), occupied[~kept_old]

    def commit(
        self,
        evicted: np.ndarray,
        priority: np.ndarray,
        text_id: np.ndarray,
        position: np.ndarray,
        vectors: np.ndarray,
    ) -> None:
        """Apply a :meth:`select`: drop ``evicted`` slots, store the entering tokens."""
        self._filled[evicted] = False
        if not len(priority):
            return
        slots = np.flatnonzero(~self._filled)[: len(priority)]
        self._priority[slots] = priority
        self._text_id[slots] = text_id
        self._position[slots] = position
        self._vectors[:, slots, :] = vectors
        self._filled[slots] = True

    def merged(self, other: SampleCandidates) -> SampleCandidates:
        """The ``limit`` lowest priorities of both (a new, compact object)."""
        if (other.limit, other.num_states, other.hidden_size) != (
            self.limit,
            self.num_states,
            self.hidden_size,
        ):
            raise ValueError("cannot merge token samples of different limits or shapes")
        rows_a, rows_b = self._rows(), other._rows()
        pri = np.concatenate([self._priority[rows_a], other._priority[rows_b]])
        keep = np.arange(len(pri))
        if len(pri) > self.limit:
            keep = np.sort(np.argpartition(pri, self.limit - 1)[: self.limit])
        from_a = rows_a[keep[keep < len(rows_a)]]
        from_b = rows_b[keep[keep >= len(rows_a)] - len(rows_a)]
        out = SampleCandidates(self.limit, self.num_states, self.hidden_size, capacity=len(keep))
        m = len(from_a)
        out._vectors[:, :m, :] = np.take(self._vectors, from_a, axis=1)
        out._vectors[:, m:, :] = np.take(other._vectors, from_b, axis=1)
        for name in ("_priority", "_text_id", "_position"):
            getattr(out, name)[:] = np.concatenate(
                [getattr(self, name)[from_a], getattr(other, name)[from_b]]
            )
        out._filled[:] = True
        return out

    def ordered(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(text_id, position, vectors (S, m, d))`` of the filled entries in (text, position)
        order. The entries are reordered in place, one state at a time, and stay valid (filled in
        slots 0..m-1); the vectors are the buffer itself when it is full (a view: commit nothing
        afterwards), else a compact copy. A fresh (S, m, d) copy of a large sample costs more
        than the copy itself: the first touch of its pages."""
        rows = self._rows()
        rows = rows[np.argsort(token_key(self._text_id[rows], self._position[rows]))]
        m = len(rows)
        if not np.array_equal(rows, np.arange(m)):  # a planned sample is in order already
            for s in range(self.num_states):
                self._vectors[s, :m] = self._vectors[s][rows]  # the gather is a (m, d) temporary
        for name in ("_priority", "_text_id", "_position"):
            getattr(self, name)[:m] = getattr(self, name)[rows]
        self._filled[:] = False
        self._filled[:m] = True
        vectors = self._vectors if m == self.capacity else self._vectors[:, :m].copy()
        return self._text_id[:m].copy(), self._position[:m].copy(), vectors
