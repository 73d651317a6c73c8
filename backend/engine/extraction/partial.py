"""Partial results: the statistics, sample candidates and token rows of some texts
(:class:`PartialExtraction`), merged in any order and finished into an :class:`ExtractionResult`
(:func:`finish`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from isoscope.engine.errors import InputError
from isoscope.engine.extraction.media import MediaTokens, check_modality, is_media, prepare_media
from isoscope.engine.extraction.sample import SampleCandidates, bytes_label, token_key
from isoscope.engine.extraction.stats import RunningStats
from isoscope.engine.extraction.tokenization import TokenizedCorpus, is_punct, tokenize
from isoscope.engine.extraction.types import ExtractionResult, ExtractionSettings, TokenTable
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import LoadedModel


@dataclass
class PartialExtraction:
    """Statistics, sample candidates and token rows of some texts of a corpus (package doc)."""

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


def tokenize_part(loaded: LoadedModel, items: list, max_length: int) -> TokenizedCorpus:
    """:func:`tokenize`, but an empty part (or one without tokens) is fine. Images and audio clips
    (:class:`isoscope.engine.inputs.media.MediaItem`) go through :func:`prepare_media` instead."""
    if is_media(items):
        return prepare_media(loaded, items)
    if items:
        check_modality(loaded, "text")
    if not items:
        model_max = loaded.info.max_positions
        cap = int(model_max) if model_max and max_length > model_max else max_length
        return TokenizedCorpus([], [], [], 0, cap)
    try:
        return tokenize(loaded, items, max_length)
    except InputError:  # the part produced no tokens; the whole corpus is checked in finish()
        empty = [np.zeros(0, dtype=np.int64) for _ in items]
        return TokenizedCorpus(
            empty, [e.astype(bool) for e in empty], [e.astype(np.int32) for e in empty], 0, 0
        )


def token_table(
    loaded: LoadedModel,
    tokenized: TokenizedCorpus,
    include: list[np.ndarray],
    text_ids: np.ndarray,
) -> TokenTable:
    """Rows of the analysed tokens of these texts, in text order then position.

    Every per-text array is joined once and masked once: no numpy call per text."""
    mask = np.concatenate(include) if include else np.zeros(0, bool)
    if not mask.any():
        return TokenTable(
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, dtype=str),
            np.zeros(0, np.int32),
            np.zeros(0, bool),
            np.zeros(0, bool),
        )
    lengths = np.array([len(m) for m in include], dtype=np.int64)
    ends = np.cumsum(lengths)
    seen = np.concatenate([[0], np.cumsum(mask)])  # analysed tokens before each position
    text_id = np.repeat(text_ids.astype(np.int32), seen[ends] - seen[ends - lengths])
    position = (np.arange(mask.size) - np.repeat(ends - lengths, lengths))[mask].astype(np.int32)
    token_ids = np.concatenate(tokenized.input_ids)[mask]
    word_id = np.concatenate(tokenized.word_ids)[mask]
    is_special = np.concatenate(tokenized.special)[mask]
    if isinstance(tokenized, MediaTokens):  # patch / frame names; no punctuation
        names = np.concatenate(tokenized.names)[mask].astype(str)
        return TokenTable(text_id, position, names, word_id, is_special, np.zeros(len(names), bool))
    # Strings and punctuation per distinct id, then spread (a Python loop per vocabulary entry
    # seen, not per token).
    unique, inverse = np.unique(token_ids, return_inverse=True)
    names = np.array(loaded.tokenizer.convert_ids_to_tokens(unique.tolist()), dtype=str)
    punct = np.array([is_punct(t) for t in names], dtype=bool)
    return TokenTable(
        text_id, position, names[inverse], word_id, is_special, punct[inverse] & ~is_special
    )


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
    keys = token_key(merged.text_id, merged.position)
    order = np.argsort(keys, kind="stable")
    tokens = merged.take(order)
    keys = keys[order]
    total = len(tokens)

    sample = partial.sample
    s_text, s_position, sample_vectors = sample.ordered()
    sample_index = np.searchsorted(keys, token_key(s_text, s_position)).astype(np.int64)
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
            f"{bytes_label(settings.sample_budget_bytes)} (token-sample memory budget)"
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
        extra=input_extra(corpus),
    )


def input_extra(corpus) -> dict:
    """What a result of images or audio keeps about its inputs (``extra["inputs"]``): the kind
    and each item's class. Empty for text."""
    if getattr(corpus, "kind", "text") == "text":
        return {}
    return {"inputs": {"kind": corpus.kind, "labels": list(corpus.labels)}}
