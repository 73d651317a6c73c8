"""Run a model over a corpus once and keep what every analysis needs: :class:`ExtractionResult`.

Pipeline: tokenize every text (truncated to ``max_length``), sort by length, run batches of at
most ``token_budget`` padded tokens (and ``batch_size`` texts) under ``torch.inference_mode()``
with ``output_hidden_states=True``, and reduce the hidden states of each batch *on the model's
device*: the analysed tokens of a few consecutive states at a time are gathered into one reused
buffer (at most ``REDUCE_GROUP_BYTES`` in float64) and folded into streaming float64 statistics
(:class:`backend.engine.stats.RunningStats`, Chan's parallel update). Only those per-batch reductions
((S, d) vectors) and the sampled token vectors leave the device; hidden states are never stacked
or copied to the host whole. If a batch runs out of memory (CUDA, MPS or CPU), it is
halved and retried, later batches stay at the smaller size, and one notice says so; nothing
already computed is lost.

Token sample (pairwise metrics, projections): every analysed token gets a priority, a seeded
64-bit hash of ``(seed, text index, position)`` (splitmix64, :func:`token_priority`); the sample
is the ``k`` tokens with the smallest priorities, ``k = min(sample_size, budget cap, tokens)``
where the budget cap keeps ``S * k * d * 4`` bytes within ``sample_budget_bytes``. The rule does
not depend on batching or on how the corpus is split across processes or machines. Since the
priorities depend only on token identity, a part's sample is known once it is tokenized
(:meth:`SampleCandidates.planned`): each sampled token's vectors are written once, into their final
slot, as its batch is reduced.

Partial API (for split or distributed runs, e.g. the Ray engine)::

    part = extract_partial(loaded, texts_subset, settings, text_ids=global_ids)  # any subset
    part.merge(other_part)                    # any grouping/order; returns part
    result = finish(part, corpus)             # -> ExtractionResult, == extract(loaded, corpus)

- ``extract_partial(loaded, texts, settings=None, *, text_ids=None, progress=None,
  on_notice=None) -> PartialExtraction``: ``texts`` are this part's texts, ``text_ids`` their
  indices in the full corpus (default ``0..len-1``). A part may be empty or contain texts that
  produce no tokens.
- :class:`PartialExtraction` (picklable; everything on the CPU): ``stats`` (RunningStats),
  ``sample`` (:class:`SampleCandidates`: ``priority`` uint64 (m,), ``text_id`` int64 (m,),
  ``position`` int32 (m,), ``vectors`` float32 (S, m, d); at most ``limit`` lowest priorities),
  ``tokens`` (list of :class:`TokenTable` chunks), ``text_ids``, ``truncated``, ``notices``,
  ``settings``, ``model`` (ModelInfo dict), ``model_fingerprint``, ``seconds``.
  ``merge(other)`` folds another part in (Chan merge of the statistics, the ``limit`` lowest
  priorities of both samples, token chunks appended); parts must cover disjoint texts.
- ``finish(partial, corpus, *, seconds=None) -> ExtractionResult``: checks that the parts cover
  every text of ``corpus`` exactly once, orders tokens by (text, position), and builds the result.
  Statistics equal the single-process ones to float64 rounding; the sample is identical.

``extract(loaded, corpus, settings)`` is ``finish(extract_partial(loaded, corpus.texts,
settings), corpus)``.
"""

from __future__ import annotations

import math
import mmap
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cached_property

import numpy as np
import torch

from backend.engine.corpus import Corpus
from backend.engine.device import to_numpy
from backend.engine.errors import InputError, UnsupportedModelError
from backend.engine.models import LoadedModel
from backend.engine.naming import hidden_state_names
from backend.engine.pooling import masked_mean
from backend.engine.stats import MOMENTS, RunningStats, WorkBuffers

Progress = Callable[[int, int], None]
Notice = Callable[[str], None]
# 2: device statistics, token-budget batches, a hash-priority token sample (partition-independent),
#    exclude_first, a byte budget for the sample.
EXTRACT_VERSION = 2


@dataclass(frozen=True)
class ExtractionSettings:
    """Everything that changes the result of an extraction (part of the cache key).

    ``token_budget``: padded tokens per batch (texts x longest text); ``batch_size`` caps the texts
    per batch. Neither changes the statistics beyond float rounding, nor the sample.
    ``exclude_special`` / ``exclude_first``: leave special tokens / position 0 of every text out
    of the statistics and the sample. ``sample_budget_bytes``: the float32 token sample
    (S x k x d x 4 bytes) stays within it; ``k`` = min(sample_size, what fits, tokens).
    """

    max_length: int = 128
    batch_size: int = 32
    sample_size: int = 8000
    seed: int = 0
    exclude_special: bool = False
    exclude_first: bool = False
    token_budget: int = 8192
    sample_budget_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        if not 2 <= self.max_length <= 8192:
            raise InputError(f"max length must be between 2 and 8192 tokens, got {self.max_length}")
        if not 1 <= self.batch_size <= 4096:
            raise InputError(f"batch size must be between 1 and 4096, got {self.batch_size}")
        if not 2 <= self.sample_size <= 1_000_000:
            raise InputError(
                f"sample size must be between 2 and 1,000,000 tokens, got {self.sample_size}"
            )
        if not 1 <= self.token_budget <= 1 << 24:
            raise InputError(
                f"token budget must be between 1 and {1 << 24:,} padded tokens per batch, "
                f"got {self.token_budget}"
            )
        if not 1 << 10 <= self.sample_budget_bytes <= 1 << 40:
            raise InputError(
                "the token-sample memory budget must be between 1 KiB and 1 TiB, "
                f"got {self.sample_budget_bytes:,} bytes"
            )

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TokenTable:
    """Per-token metadata, one row per analysed token (all arrays have the same length).

    ``position`` is the index in the model's input (0 is [CLS] for BERT); ``word_id`` is -1 for
    special tokens.
    """

    text_id: np.ndarray  # int32 (n,)
    position: np.ndarray  # int32 (n,)
    token: np.ndarray  # str (n,)
    word_id: np.ndarray  # int32 (n,)
    is_special: np.ndarray  # bool (n,)
    is_punct: np.ndarray  # bool (n,)

    def __len__(self) -> int:
        return len(self.text_id)

    def take(self, index: np.ndarray) -> TokenTable:
        return TokenTable(*(getattr(self, f)[index] for f in self.__dataclass_fields__))

    def category(self) -> np.ndarray:
        """'position 0' / 'special' / 'punctuation' / 'other' per token (Timkey's split)."""
        out = np.full(len(self), "other", dtype=object)
        out[self.is_punct] = "punctuation"
        out[self.is_special] = "special"
        out[self.position == 0] = "position 0"
        return out

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({f: getattr(self, f) for f in self.__dataclass_fields__})


@dataclass(frozen=True)
class ExtractionResult:
    """Hidden-state statistics of one model on one corpus.

    Shapes (S = num_layers + 1 hidden states, d = hidden size, n = analysed tokens, k = sample):
    - ``mean``, ``variance``, ``min``, ``max``, ``mean_abs``: float64 (S, d), over all n tokens.
    - ``argmin_count`` / ``argmax_count``: int64 (S, d); how many tokens have their min/max in dim j.
    - ``sample_vectors``: float32 (S, k, d); ``sample_index``: int64 (k,) rows of ``tokens``.
    - ``tokens``: :class:`TokenTable` with n rows (text order, then position).

    Footgun: index 0 is the embedding output ("emb"), index i the output of layer i; never drop it.
    Statistics cover every non-padding token, special tokens included unless
    ``settings.exclude_special``.
    """

    model: dict
    model_fingerprint: str
    corpus_name: str
    corpus_sha: str
    texts: tuple[str, ...]
    notices: tuple[str, ...]
    settings: ExtractionSettings
    mean: np.ndarray
    variance: np.ndarray
    min: np.ndarray
    max: np.ndarray
    mean_abs: np.ndarray
    argmin_count: np.ndarray
    argmax_count: np.ndarray
    sample_vectors: np.ndarray
    sample_index: np.ndarray
    tokens: TokenTable
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def num_states(self) -> int:
        return self.mean.shape[0]

    @property
    def num_layers(self) -> int:
        return self.mean.shape[0] - 1

    @property
    def hidden_size(self) -> int:
        return self.mean.shape[1]

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    @property
    def num_texts(self) -> int:
        return len(self.texts)

    @property
    def state_names(self) -> list[str]:
        return hidden_state_names(self.num_layers)

    @property
    def argmin_freq(self) -> np.ndarray:
        return self.argmin_count / max(self.num_tokens, 1)

    @property
    def argmax_freq(self) -> np.ndarray:
        return self.argmax_count / max(self.num_tokens, 1)

    @property
    def sample_tokens(self) -> TokenTable:
        return self.tokens.take(self.sample_index)

    def sample_context(self, row: int, width: int = 8) -> str:
        """The sampled token ``row`` in its text, for hover labels: '... left [tok] right ...'."""
        i = int(self.sample_index[row])
        t = self.tokens
        same = np.flatnonzero(t.text_id == t.text_id[i])
        pieces = [
            f"[{t.token[j]}]" if j == i else str(t.token[j])
            for j in same
            if abs(int(t.position[j]) - int(t.position[i])) <= width
        ]
        return " ".join(pieces)


# ----------------------------------------------------------------------------- tokenization


@dataclass(frozen=True)
class TokenizedCorpus:
    """Token ids per text (truncated), with special-token and word-id metadata."""

    input_ids: list[np.ndarray]
    special: list[np.ndarray]
    word_ids: list[np.ndarray]
    truncated: int
    max_length: int

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.array([len(ids) for ids in self.input_ids], dtype=np.int64)

    def analysed(self, exclude_special: bool, exclude_first: bool) -> list[np.ndarray]:
        """Per text, a boolean mask of the tokens the statistics cover."""
        masks = []
        for sp in self.special:
            keep = ~sp if exclude_special else np.ones_like(sp)
            if exclude_first and len(keep):
                keep[0] = False
            masks.append(keep)
        return masks


def length_order(lengths: np.ndarray) -> np.ndarray:
    """Texts with tokens, longest first (stable): memory trouble shows at once, padding is small."""
    order = np.argsort(-lengths, kind="stable")
    return order[lengths[order] > 0]


def batch_count(width: int, left: int, batch_size: int, token_budget: int) -> int:
    """Texts in the next batch when its longest text has ``width`` tokens and ``left`` remain:
    at most ``batch_size`` texts and ``token_budget`` padded tokens, at least one."""
    return max(1, min(batch_size, token_budget // max(1, width), left))


def plan_batches(lengths: np.ndarray, batch_size: int, token_budget: int) -> list[np.ndarray]:
    """The batches :func:`extract_partial` forms from these text lengths (before any
    out-of-memory halving, which only changes float rounding)."""
    order, batches, start = length_order(lengths), [], 0
    while start < len(order):
        count = batch_count(
            int(lengths[order[start]]), len(order) - start, batch_size, token_budget
        )
        batches.append(order[start : start + count])
        start += count
    return batches


def tokenize(
    loaded: LoadedModel, texts: tuple[str, ...] | list[str], max_length: int
) -> TokenizedCorpus:
    """Tokenize with truncation; counts the texts that were cut."""
    if not texts:
        raise InputError("no texts to analyse; give at least one non-empty text")
    model_max = loaded.info.max_positions
    if model_max and max_length > model_max:
        max_length = int(model_max)
    tok = loaded.tokenizer
    enc = tok(
        list(texts),
        truncation=True,
        max_length=max_length,
        return_special_tokens_mask=True,
        return_offsets_mapping=bool(getattr(tok, "is_fast", False)),
    )
    input_ids, special, word_ids = [], [], []
    truncated = 0
    for i, ids in enumerate(enc["input_ids"]):
        input_ids.append(np.asarray(ids, dtype=np.int64))
        sp = np.asarray(enc["special_tokens_mask"][i], dtype=bool)
        special.append(sp)
        if getattr(tok, "is_fast", False):
            words = enc.word_ids(i)
            word_ids.append(np.array([-1 if w is None else w for w in words], dtype=np.int32))
            if len(ids) >= max_length:
                ends = [
                    e
                    for (s, e), is_sp in zip(enc["offset_mapping"][i], sp, strict=False)
                    if not is_sp
                ]
                if ends and max(ends) < len(texts[i].rstrip()):
                    truncated += 1
        else:
            word_ids.append(np.where(sp, -1, np.arange(len(ids))).astype(np.int32))
            truncated += int(len(ids) >= max_length)
    if sum(len(ids) for ids in input_ids) == 0:
        raise InputError("the texts produced no tokens; give real text")
    return TokenizedCorpus(input_ids, special, word_ids, truncated, max_length)


def _is_punct(token: str) -> bool:
    core = token.removeprefix("##").lstrip("Ġ▁")
    return bool(core) and all(unicodedata.category(c)[0] in "PS" for c in core)


# ----------------------------------------------------------------------------- token sample

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


def _token_key(text_id: np.ndarray, position: np.ndarray) -> np.ndarray:
    return (np.asarray(text_id, dtype=np.int64) << _POSITION_BITS) | np.asarray(
        position, dtype=np.int64
    )


def sample_limit(settings: ExtractionSettings, num_states: int, hidden_size: int) -> int:
    """Tokens kept per state: ``sample_size``, capped so S * k * d * 4 bytes fit the budget."""
    per_token = num_states * hidden_size * 4
    fits = settings.sample_budget_bytes // per_token
    if fits < 2:
        raise InputError(
            f"the token-sample memory budget ({_bytes_label(settings.sample_budget_bytes)}) holds "
            f"fewer than 2 tokens of this model ({num_states} states x {hidden_size} dims x 4 "
            "bytes per token); raise the budget"
        )
    return int(min(settings.sample_size, fits))


def _bytes_label(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _zeros(shape: tuple[int, ...], dtype: type[np.generic]) -> np.ndarray:
    """``np.zeros`` for a large buffer that will be written whole: its pages faulted in at once.

    numpy asks the kernel for transparent huge pages on large arrays; where the kernel compacts
    memory to serve them on first touch (``defrag=madvise``, Debian's default), writing SmolLM2's
    466 MB sample took 0.9 s, against 0.23 s for an anonymous ``mmap`` with ``MAP_POPULATE``
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
        chosen = chosen[np.argsort(_token_key(text_id[chosen], position[chosen]), kind="stable")]
        out = cls(limit, num_states, hidden_size, capacity=m)
        out._priority[:] = priority[chosen]
        out._text_id[:] = text_id[chosen]
        out._position[:] = position[chosen]
        out._filled[:] = True
        slot = np.full(n, -1, dtype=np.int64)
        slot[chosen] = np.arange(m)
        return out, slot

    def write(self, s0: int, slots: np.ndarray, vectors: np.ndarray | torch.Tensor) -> None:
        """Store the (g, len(slots), d) vectors of planned tokens (see :meth:`planned`) for
        states ``s0 .. s0 + g - 1``."""
        if isinstance(vectors, torch.Tensor):
            vectors = to_numpy(vectors, dtype=torch.float32)
        for j, state in enumerate(vectors):
            self._vectors[s0 + j][slots] = state

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
        afterwards), else a compact copy. A fresh (S, m, d) copy of a large sample cost more than
        the copy itself (first touch of its pages: 0.8 s for SmolLM2's 466 MB sample)."""
        rows = self._rows()
        rows = rows[np.argsort(_token_key(self._text_id[rows], self._position[rows]))]
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


# ----------------------------------------------------------------------------- partial results


@dataclass
class PartialExtraction:
    """Statistics, sample candidates and token rows of some texts of a corpus (module doc)."""

    settings: ExtractionSettings
    model: dict
    model_fingerprint: str
    text_ids: np.ndarray  # int64, global indices of the texts covered
    stats: RunningStats
    sample: SampleCandidates
    tokens: list[TokenTable]
    truncated: int = 0
    max_length: int = 0
    notices: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: PartialExtraction) -> PartialExtraction:
        """Fold ``other`` (disjoint texts, same model and settings) into ``self``; returns self."""
        if other.settings != self.settings or other.model_fingerprint != self.model_fingerprint:
            raise ValueError("cannot merge extractions of different models or settings")
        if np.intersect1d(self.text_ids, other.text_ids).size:
            raise ValueError("cannot merge extractions that cover the same texts twice")
        self.text_ids = np.concatenate([self.text_ids, other.text_ids])
        self.stats = self.stats.to("cpu").merge(other.stats)
        self.sample = self.sample.merged(other.sample)
        self.tokens = self.tokens + other.tokens
        self.truncated += other.truncated
        self.max_length = max(self.max_length, other.max_length)
        self.notices += [n for n in other.notices if n not in self.notices]
        self.seconds += other.seconds
        return self


def _tokenize_part(loaded: LoadedModel, texts: list[str], max_length: int) -> TokenizedCorpus:
    """:func:`tokenize`, but an empty part (or one without tokens) is fine."""
    if not texts:
        model_max = loaded.info.max_positions
        cap = int(model_max) if model_max and max_length > model_max else max_length
        return TokenizedCorpus([], [], [], 0, cap)
    try:
        return tokenize(loaded, texts, max_length)
    except InputError:  # the part produced no tokens; the whole corpus is checked in finish()
        empty = [np.zeros(0, dtype=np.int64) for _ in texts]
        return TokenizedCorpus(
            empty, [e.astype(bool) for e in empty], [e.astype(np.int32) for e in empty], 0, 0
        )


def _token_table(
    loaded: LoadedModel,
    tokenized: TokenizedCorpus,
    include: list[np.ndarray],
    text_ids: np.ndarray,
) -> TokenTable:
    """Rows of the analysed tokens of these texts, in text order then position."""
    counts = np.array([int(m.sum()) for m in include], dtype=np.int64)
    if not counts.sum():
        return TokenTable(
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, dtype=str),
            np.zeros(0, np.int32),
            np.zeros(0, bool),
            np.zeros(0, bool),
        )
    text_id = np.repeat(text_ids.astype(np.int32), counts)
    position = np.concatenate([np.flatnonzero(m) for m in include]).astype(np.int32)
    token_ids = np.concatenate(
        [ids[m] for ids, m in zip(tokenized.input_ids, include, strict=True)]
    )
    # Strings and punctuation per distinct id, then spread (a Python loop per vocabulary entry
    # seen, not per token).
    unique, inverse = np.unique(token_ids, return_inverse=True)
    names = np.array(loaded.tokenizer.convert_ids_to_tokens(unique.tolist()), dtype=str)
    punct = np.array([_is_punct(t) for t in names], dtype=bool)
    word_id = np.concatenate([w[m] for w, m in zip(tokenized.word_ids, include, strict=True)])
    is_special = np.concatenate([sp[m] for sp, m in zip(tokenized.special, include, strict=True)])
    return TokenTable(
        text_id, position, names[inverse], word_id, is_special, punct[inverse] & ~is_special
    )


# ----------------------------------------------------------------------------- forward passes


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA/MPS/CPU out-of-memory errors, whatever class the backend raises."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    if isinstance(exc, RuntimeError):
        msg = str(exc).lower()
        return "out of memory" in msg or "can't allocate memory" in msg
    return False


def _free_device_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps" and hasattr(torch, "mps"):
        torch.mps.empty_cache()


def pad_token_id(loaded: LoadedModel) -> int:
    """The id padded positions get (0 when the tokenizer has none: the attention mask hides them)."""
    pad = loaded.tokenizer.pad_token_id
    return 0 if pad is None else int(pad)


def _pad_batch(
    tokenized: TokenizedCorpus, rows: np.ndarray, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ``(input_ids, attention_mask)`` int64 arrays of the texts ``rows``."""
    lengths = tokenized.lengths[rows]
    width = int(lengths.max()) if len(rows) else 0
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, t in enumerate(rows):
        n = lengths[r]
        ids[r, :n] = tokenized.input_ids[t]
        mask[r, :n] = 1
    return ids, mask


def _hidden_states(
    loaded: LoadedModel, ids: np.ndarray, mask: np.ndarray
) -> tuple[torch.Tensor, ...]:
    """One forward pass; the tuple of S (B, T, d) hidden states, on the model's device(s)."""
    input_ids = torch.from_numpy(ids).to(loaded.device)
    attention_mask = torch.from_numpy(mask).to(loaded.device)
    out = loaded.encoder(
        input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
    )
    hidden_states = getattr(out, "hidden_states", None)
    if not hidden_states:
        raise UnsupportedModelError(
            f"{loaded.info.source!r} ({loaded.info.architecture}) returns no hidden states; "
            "isoscope needs a model that supports output_hidden_states"
        )
    return tuple(hidden_states)


def extract_partial(
    loaded: LoadedModel,
    texts: tuple[str, ...] | list[str],
    settings: ExtractionSettings | None = None,
    *,
    text_ids: np.ndarray | list[int] | None = None,
    progress: Progress | None = None,
    on_notice: Notice | None = None,
) -> PartialExtraction:
    """Statistics, sample candidates and token rows of ``texts`` (module doc: Partial API)."""
    settings = settings or ExtractionSettings()
    started = time.perf_counter()
    texts = list(texts)
    text_ids = np.arange(len(texts)) if text_ids is None else np.asarray(text_ids)
    text_ids = text_ids.astype(np.int64)
    if text_ids.shape != (len(texts),) or len(np.unique(text_ids)) != len(texts):
        raise ValueError("text_ids must give one distinct global index per text")
    if len(texts) and (text_ids.min() < 0 or text_ids.max() >= 1 << 47):
        raise ValueError("text_ids must lie in [0, 2**47)")
    num_states = loaded.info.num_layers + 1
    d = loaded.info.hidden_size
    limit = sample_limit(settings, num_states, d)
    tokenized = _tokenize_part(loaded, texts, settings.max_length)
    include = tokenized.analysed(settings.exclude_special, settings.exclude_first)
    tokens = _token_table(loaded, tokenized, include, text_ids)
    # Analysed tokens in text order, then position: text t owns rows offset[t]:offset[t + 1].
    counts = np.array([int(m.sum()) for m in include], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    tok_text = np.repeat(text_ids, counts)
    tok_pos = tokens.position.astype(np.int64)
    sample, slot = SampleCandidates.planned(
        limit, num_states, d, token_priority(settings.seed, tok_text, tok_pos), tok_text, tok_pos
    )
    plan = _BatchPlan(tokenized, offset, tok_pos, slot, WorkBuffers())
    stats = RunningStats(num_states, d, loaded.device)
    if loaded.device.type == "cpu" and int(offset[-1]) * num_states * d >= COMPILE_MIN_ELEMENTS:
        MOMENTS.compile(loaded.dtype)  # repaid by this corpus; a no-op once warm
    notices: list[str] = []

    lengths = tokenized.lengths
    order = length_order(lengths)
    pad_id = pad_token_id(loaded)
    budget, cap = settings.token_budget, settings.batch_size
    start, done, retry = 0, len(texts) - len(order), False
    with torch.inference_mode():
        while start < len(order):
            width = int(lengths[order[start]])
            count = batch_count(width, len(order) - start, cap, budget)
            rows = order[start : start + count]
            try:
                # No reference to the batch's hidden states outlives this line: after an
                # out-of-memory error the retry starts with them released.
                b_stats = _reduce_batch(
                    plan, _forward_batch(loaded, plan, rows, pad_id, sample), sample
                )
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                if count == 1:
                    raise InputError(
                        f"out of memory on {loaded.info.device} with a single text of {width} "
                        "tokens; lower the max length, use bfloat16 or a device with more memory"
                    ) from exc
                cap, budget = max(1, count // 2), max(1, (count // 2) * width)
                message = (
                    f"out of memory with {count} texts x {width} tokens per batch on "
                    f"{loaded.info.device}; continuing with at most {cap} texts per batch"
                )
                if not notices or not notices[-1].startswith("out of memory"):
                    notices.append(message)
                    if on_notice is not None:
                        on_notice(message)
                else:
                    notices[-1] = message
                retry = True
                continue
            if retry:  # the failed batch's tensors are released by now
                _free_device_memory(loaded.device)
                retry = False
            stats.merge(b_stats)
            start += count
            done += count
            if progress is not None:
                progress(done, len(texts))
    if progress is not None and not len(order):
        progress(len(texts), len(texts))
    plan.buffers.clear()
    return PartialExtraction(
        settings=settings,
        model=loaded.info.to_dict(),
        model_fingerprint=loaded.fingerprint,
        text_ids=text_ids,
        stats=stats.to("cpu"),
        sample=sample,
        tokens=[tokens],
        truncated=tokenized.truncated,
        max_length=tokenized.max_length,
        notices=notices,
        seconds=time.perf_counter() - started,
    )


@dataclass
class _BatchPlan:
    """What every batch of :func:`extract_partial` reads: the tokenized texts, where each text's
    analysed tokens start in the token table (``offset``) and their positions (``position``),
    each token's sample slot (-1: not sampled) and the reusable scratch buffers."""

    tokenized: TokenizedCorpus
    offset: np.ndarray
    position: np.ndarray
    slot: np.ndarray
    buffers: WorkBuffers


@dataclass
class _Batch:
    """A forward pass's hidden states and where its analysed and sampled tokens are."""

    hidden_states: tuple[torch.Tensor, ...]
    flat: np.ndarray  # analysed tokens' rows in the flattened (B * T) batch, (text, position) order
    pick: np.ndarray  # which of those are sampled
    slots: np.ndarray  # and their sample slots


def _forward_batch(
    loaded: LoadedModel,
    plan: _BatchPlan,
    rows: np.ndarray,
    pad_id: int,
    sample: SampleCandidates,
) -> _Batch:
    """Forward the texts ``rows`` (one padded batch); nothing is reduced or stored yet."""
    ids, mask = _pad_batch(plan.tokenized, rows, pad_id)
    width = ids.shape[1]
    tok = np.concatenate([np.arange(plan.offset[t], plan.offset[t + 1]) for t in rows])
    row_of = np.repeat(np.arange(len(rows)), plan.offset[rows + 1] - plan.offset[rows])
    flat = row_of * width + plan.position[tok]  # analysed tokens in the (B * T) padded batch
    pick = np.flatnonzero(plan.slot[tok] >= 0)  # which of them are sampled
    hidden_states = _hidden_states(loaded, ids, mask)
    if len(hidden_states) != sample.num_states or hidden_states[0].shape[-1] != sample.hidden_size:
        raise UnsupportedModelError(
            f"the model returned {len(hidden_states)} hidden states of width "
            f"{hidden_states[0].shape[-1]}, expected {sample.num_states} of width "
            f"{sample.hidden_size}"
        )
    return _Batch(hidden_states, flat, pick, plan.slot[tok][pick])


# Activations (tokens x states x width) from which an extraction on the CPU compiles the moments
# kernel itself when the app's warm-up has not: the compiled kernel saves ~2 ns per element
# (MiniLM 4.5 us per token, SmolLM2 38 us) and compiling costs 1.5-3.5 s with inductor's disk
# cache warm, up to ~25 s on a fresh machine.
COMPILE_MIN_ELEMENTS = 2_500_000_000

# Float64 bytes of hidden states reduced together: a few large operations per batch instead of a
# dozen per state (see RunningStats._fill_states), with bounded scratch memory.
REDUCE_GROUP_BYTES = 32 << 20


def _reduce_batch(plan: _BatchPlan, batch: _Batch, sample: SampleCandidates) -> RunningStats:
    """Reduce one batch's hidden states where they live; returns the batch's statistics.

    Consecutive states on one device are gathered (analysed tokens only) into one (g, n, d)
    buffer and reduced together. The sampled tokens' vectors go straight to their planned slots
    (a redone batch writes the same slots again), so an out-of-memory error loses nothing: the
    caller merges the statistics only when the reduction succeeded.
    """
    num_states, d = sample.num_states, sample.hidden_size
    hidden_states, n = batch.hidden_states, len(batch.flat)
    stats = RunningStats(num_states, d, hidden_states[0].device)
    most = max(1, REDUCE_GROUP_BYTES // max(1, n * d * 8))
    index: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
    s0 = 0
    while s0 < num_states:
        device = hidden_states[s0].device  # device_map="auto" spreads states over devices
        # Split what is left evenly (31 states, at most 10 a group: 8, 8, 8, 7, not 10, 10, 10, 1),
        # so no group is a lone state, which the compiled moments kernel leaves to eager torch.
        left = num_states - s0
        group = -(-left // -(-left // most))
        s1 = s0 + 1
        while s1 < num_states and s1 - s0 < group and hidden_states[s1].device == device:
            s1 += 1
        if device not in index:
            index[device] = (
                torch.from_numpy(batch.flat).to(device),
                torch.from_numpy(batch.pick).to(device),
            )
        flat, pick = index[device]
        x = plan.buffers.take("x", (s1 - s0, n, d), hidden_states[s0].dtype, device)
        for j, h in enumerate(hidden_states[s0:s1]):
            torch.index_select(h.reshape(-1, d), 0, flat, out=x[j])
        stats.add_states(s0, x, plan.buffers)
        if len(pick):
            sample.write(s0, batch.slots, x.index_select(1, pick))
        s0 = s1
    return stats


def finish(
    partial: PartialExtraction, corpus: Corpus, *, seconds: float | None = None
) -> ExtractionResult:
    """The :class:`ExtractionResult` of a partial extraction that covers all of ``corpus``."""
    covered = np.sort(partial.text_ids)
    if len(covered) != len(corpus.texts) or not np.array_equal(covered, np.arange(len(covered))):
        raise ValueError(
            f"the partial extraction covers {len(covered)} texts, not exactly the corpus's "
            f"{len(corpus.texts)} (indices 0..{len(corpus.texts) - 1})"
        )
    settings = partial.settings
    chunks = [c for c in partial.tokens if len(c)]
    if not chunks and not (settings.exclude_special or settings.exclude_first):
        raise InputError("the texts produced no tokens; give real text")
    if not chunks:
        what = "special or first tokens" if settings.exclude_first else "special tokens"
        raise InputError(
            f"no tokens left to analyse (only {what}?); turn off 'exclude special tokens'"
            + (" and 'exclude first token'" if settings.exclude_first else "")
        )
    merged = TokenTable(
        *(np.concatenate([getattr(c, f) for c in chunks]) for f in TokenTable.__dataclass_fields__)
    )
    keys = _token_key(merged.text_id, merged.position)
    order = np.argsort(keys, kind="stable")
    tokens = merged.take(order)
    keys = keys[order]
    total = len(tokens)

    sample = partial.sample
    s_text, s_position, sample_vectors = sample.ordered()
    sample_index = np.searchsorted(keys, _token_key(s_text, s_position)).astype(np.int64)
    k = len(sample_index)

    stats = partial.stats
    if stats.count != total:
        raise ValueError(f"statistics cover {stats.count} tokens but the token table {total}")
    notices = list(corpus.notices)
    if partial.truncated:
        notices.append(
            f"{partial.truncated} text(s) were cut to {partial.max_length} tokens (max length)"
        )
    notices += partial.notices
    if sample.limit < min(settings.sample_size, total):
        notices.append(
            f"{k:,} tokens per state to stay within "
            f"{_bytes_label(settings.sample_budget_bytes)} (token-sample memory budget)"
        )
    if k < total:
        notices.append(
            f"pairwise metrics and projections use a random sample of {k:,} of {total:,} tokens"
        )
    return ExtractionResult(
        model=partial.model,
        model_fingerprint=partial.model_fingerprint,
        corpus_name=corpus.name,
        corpus_sha=corpus.sha,
        texts=corpus.texts,
        notices=tuple(notices),
        settings=settings,
        mean=stats.mean,
        variance=stats.variance,
        min=stats.min,
        max=stats.max,
        mean_abs=stats.mean_abs,
        argmin_count=stats.argmin_count,
        argmax_count=stats.argmax_count,
        sample_vectors=sample_vectors,
        sample_index=sample_index,
        tokens=tokens,
        seconds=partial.seconds if seconds is None else seconds,
    )


def extract(
    loaded: LoadedModel,
    corpus: Corpus,
    settings: ExtractionSettings | None = None,
    progress: Progress | None = None,
    on_notice: Notice | None = None,
) -> ExtractionResult:
    """Hidden-state statistics and a token sample of ``loaded`` on ``corpus`` (see module doc)."""
    settings = settings or ExtractionSettings()
    started = time.perf_counter()
    partial = extract_partial(
        loaded, corpus.texts, settings, progress=progress, on_notice=on_notice
    )
    return finish(partial, corpus, seconds=time.perf_counter() - started)


# ----------------------------------------------------------------------------- host-side batches (other analyses)


def forward_batches(
    loaded: LoadedModel,
    tokenized: TokenizedCorpus,
    batch_size: int,
    progress: Progress | None = None,
) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """Yield ``(text_ids (B,), hidden (S, B, T, d) float32 on CPU, attention_mask (B, T) bool)``.

    Texts are sorted by length (longest first, so memory trouble shows at once) and right-padded.
    """
    lengths = tokenized.lengths
    order = np.argsort(-lengths, kind="stable")
    pad_id = pad_token_id(loaded)
    done = 0
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch_ids = order[start : start + batch_size]
            ids, mask = _pad_batch(tokenized, batch_ids, pad_id)
            hidden_states = _hidden_states(loaded, ids, mask)
            hidden = torch.stack(hidden_states).to("cpu", torch.float32)  # (S, B, T, d)
            done += len(batch_ids)
            if progress is not None:
                progress(done, len(order))
            yield batch_ids, hidden, torch.from_numpy(mask).bool()


def mean_pooled(
    loaded: LoadedModel,
    texts: list[str] | tuple[str, ...],
    max_length: int = 128,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> np.ndarray:
    """Mean-pooled text vectors per hidden state, float64 (S, n_texts, d).

    Pools over every non-padding token, special tokens included, as sentence-transformers does
    (its Pooling module clamps the mask sum; so do we).
    """
    tokenized = tokenize(loaded, tuple(texts), max_length)
    num_states = loaded.info.num_layers + 1
    pooled = np.zeros((num_states, len(texts), loaded.info.hidden_size))
    for batch_ids, hidden, attn in forward_batches(loaded, tokenized, batch_size, progress):
        pooled[:, batch_ids, :] = to_numpy(masked_mean(hidden.double(), attn))
    return pooled


def encode_text(
    loaded: LoadedModel, text: str, max_length: int = 128
) -> tuple[np.ndarray, TokenTable]:
    """Full hidden states of one text: float32 (S, T, d) and its token table (per-text views)."""
    tokenized = tokenize(loaded, (text,), max_length)
    ((_, hidden, _),) = list(forward_batches(loaded, tokenized, 1))
    ids = tokenized.input_ids[0]
    tokens_str = np.array(loaded.tokenizer.convert_ids_to_tokens(ids.tolist()), dtype=str)
    special = tokenized.special[0]
    table = TokenTable(
        text_id=np.zeros(len(ids), dtype=np.int32),
        position=np.arange(len(ids), dtype=np.int32),
        token=tokens_str,
        word_id=tokenized.word_ids[0],
        is_special=special,
        is_punct=np.array([_is_punct(t) for t in tokens_str]) & ~special,
    )
    return to_numpy(hidden[:, 0], dtype=None), table
