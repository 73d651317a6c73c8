"""Run a model over a corpus once and keep what every analysis needs: :class:`ExtractionResult`.

Pipeline: tokenize every text (truncated to ``max_length``), sort by length, run batches under
``torch.inference_mode()`` with ``output_hidden_states=True``, move each batch to the CPU at
once, and fold the non-padding tokens into streaming float64 statistics
(:class:`backend.stats.RunningStats`). A seeded random sample of token vectors (capped at
``sample_size``) is kept for pairwise metrics and projections.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from backend.corpus import Corpus
from backend.errors import InputError, UnsupportedModelError
from backend.models import LoadedModel
from backend.naming import hidden_state_names
from backend.stats import RunningStats

Progress = Callable[[int, int], None]
EXTRACT_VERSION = 1


@dataclass(frozen=True)
class ExtractionSettings:
    """Everything that changes the result of an extraction (part of the cache key)."""

    max_length: int = 128
    batch_size: int = 32
    sample_size: int = 8000
    seed: int = 0
    exclude_special: bool = False

    def __post_init__(self) -> None:
        if not 2 <= self.max_length <= 8192:
            raise InputError(f"max length must be between 2 and 8192 tokens, got {self.max_length}")
        if not 1 <= self.batch_size <= 4096:
            raise InputError(f"batch size must be between 1 and 4096, got {self.batch_size}")
        if not 2 <= self.sample_size <= 1_000_000:
            raise InputError(
                f"sample size must be between 2 and 1,000,000 tokens, got {self.sample_size}"
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

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(ids) for ids in self.input_ids], dtype=np.int64)


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


# ----------------------------------------------------------------------------- forward passes


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
    pad_id = loaded.tokenizer.pad_token_id
    pad_id = 0 if pad_id is None else int(pad_id)
    encoder = loaded.encoder
    done = 0
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch_ids = order[start : start + batch_size]
            width = int(lengths[batch_ids].max())
            ids = np.full((len(batch_ids), width), pad_id, dtype=np.int64)
            mask = np.zeros((len(batch_ids), width), dtype=np.int64)
            for row, t in enumerate(batch_ids):
                n = lengths[t]
                ids[row, :n] = tokenized.input_ids[t]
                mask[row, :n] = 1
            input_ids = torch.from_numpy(ids).to(loaded.device)
            attention_mask = torch.from_numpy(mask).to(loaded.device)
            out = encoder(
                input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
            )
            hidden_states = getattr(out, "hidden_states", None)
            if not hidden_states:
                raise UnsupportedModelError(
                    f"{loaded.info.source!r} ({loaded.info.architecture}) returns no hidden states; "
                    "isoscope needs a model that supports output_hidden_states"
                )
            hidden = torch.stack(hidden_states).to("cpu", torch.float32)  # (S, B, T, d)
            done += len(batch_ids)
            if progress is not None:
                progress(done, len(order))
            yield batch_ids, hidden, torch.from_numpy(mask).bool()


def extract(
    loaded: LoadedModel,
    corpus: Corpus,
    settings: ExtractionSettings | None = None,
    progress: Progress | None = None,
) -> ExtractionResult:
    """Hidden-state statistics and a token sample of ``loaded`` on ``corpus`` (see module doc)."""
    settings = settings or ExtractionSettings()
    started = time.perf_counter()
    tokenized = tokenize(loaded, corpus.texts, settings.max_length)
    include = [~sp if settings.exclude_special else np.ones_like(sp) for sp in tokenized.special]
    counts = np.array([int(m.sum()) for m in include], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    total = int(offsets[-1])
    if total == 0:
        raise InputError(
            "no tokens left to analyse (only special tokens?); turn off 'exclude special tokens'"
        )

    # Token metadata in text order (text, then position), for the tokens the statistics cover.
    vocab_tokens = loaded.tokenizer.convert_ids_to_tokens
    text_id = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
    position = np.concatenate([np.flatnonzero(m) for m in include]).astype(np.int32)
    token_ids = np.concatenate(
        [ids[m] for ids, m in zip(tokenized.input_ids, include, strict=True)]
    )
    token = np.array(vocab_tokens(token_ids.tolist()), dtype=str)
    word_id = np.concatenate([w[m] for w, m in zip(tokenized.word_ids, include, strict=True)])
    is_special = np.concatenate([sp[m] for sp, m in zip(tokenized.special, include, strict=True)])
    is_punct = np.array([_is_punct(t) for t in token], dtype=bool) & ~is_special
    tokens = TokenTable(text_id, position, token, word_id, is_special, is_punct)

    # Seeded uniform sample of analysed tokens, chosen up front so one pass fills it.
    rng = np.random.default_rng(settings.seed)
    k = min(settings.sample_size, total)
    sample_index = np.sort(rng.choice(total, size=k, replace=False))
    slot = np.full(total, -1, dtype=np.int64)
    slot[sample_index] = np.arange(k)

    num_states = loaded.info.num_layers + 1
    d = loaded.info.hidden_size
    stats = RunningStats(num_states, d)
    sample_vectors = np.zeros((num_states, k, d), dtype=np.float32)
    for batch_ids, hidden, attn in forward_batches(
        loaded, tokenized, settings.batch_size, progress
    ):
        if hidden.shape[0] != num_states or hidden.shape[-1] != d:
            raise UnsupportedModelError(
                f"the model returned {hidden.shape[0]} hidden states of width {hidden.shape[-1]}, "
                f"expected {num_states} of width {d}"
            )
        keep = attn.clone()
        global_rows = []
        for row, t in enumerate(batch_ids):
            n = len(include[t])
            keep[row, :n] = torch.from_numpy(include[t])
            global_rows.append(offsets[t] + np.arange(counts[t]))
        vectors = hidden[:, keep].numpy()  # (S, tokens in batch, d), row-major = text order per row
        stats.update(vectors)
        rows = np.concatenate(global_rows)
        slots = slot[rows]
        hit = slots >= 0
        if hit.any():
            sample_vectors[:, slots[hit], :] = vectors[:, hit, :]

    notices = list(corpus.notices)
    if tokenized.truncated:
        notices.append(
            f"{tokenized.truncated} text(s) were cut to {tokenized.max_length} tokens (max length)"
        )
    if k < total:
        notices.append(
            f"pairwise metrics and projections use a random sample of {k:,} of {total:,} tokens"
        )
    return ExtractionResult(
        model=loaded.info.to_dict(),
        model_fingerprint=loaded.fingerprint,
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
        seconds=time.perf_counter() - started,
    )


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
        m = attn.to(hidden.dtype)[None, :, :, None]  # (1, B, T, 1)
        summed = (hidden.double() * m.double()).sum(dim=2)
        pooled[:, batch_ids, :] = (summed / m.double().sum(dim=2).clamp(min=1e-9)).numpy()
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
    return hidden[:, 0].numpy(), table
