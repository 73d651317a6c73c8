"""The data an extraction produces: its settings (:class:`ExtractionSettings`, part of the cache
key), the per-token metadata (:class:`TokenTable`) and the result (:class:`ExtractionResult`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from isoscope.engine.errors import InputError
from isoscope.engine.naming import hidden_state_names
from isoscope.engine.params import BATCH_SIZE, MAX_LENGTH, SAMPLE_SIZE, SEED, TOKEN_BUDGET

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

    max_length: int = MAX_LENGTH.default
    batch_size: int = BATCH_SIZE.default
    sample_size: int = SAMPLE_SIZE.default
    seed: int = SEED.default
    exclude_special: bool = False
    exclude_first: bool = False
    token_budget: int = TOKEN_BUDGET.default
    sample_budget_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        for param in (MAX_LENGTH, BATCH_SIZE, SAMPLE_SIZE, SEED, TOKEN_BUDGET):
            param.check(getattr(self, param.name))
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
    def input_kind(self) -> str:
        """``text``, ``image`` or ``audio``: what the extraction read."""
        return (self.extra or {}).get("inputs", {}).get("kind", "text")

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
