"""Tokenization of a corpus (truncated, with special-token and word-id metadata) and the
length-sorted batch plan every forward pass of an extraction follows."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from isoscope.engine.errors import InputError
from isoscope.engine.load.models import LoadedModel


@dataclass(frozen=True)
class TokenizedCorpus:
    """Token ids per text (truncated), with special-token and word-id metadata. ``group`` (or
    None): a value per text that every text of one batch must share, for a model whose real
    tokens move when a batch is padded (:attr:`InputLayout.pad_with_mask` False): a text's
    length, so each batch holds texts of one length and runs unpadded."""

    input_ids: list[np.ndarray]
    special: list[np.ndarray]
    word_ids: list[np.ndarray]
    truncated: int
    max_length: int
    group: np.ndarray | None = None

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


def check_modality(loaded: LoadedModel, kind: str) -> None:
    """One :class:`InputError` when the corpus kind is not what the model reads."""
    modality = loaded.layout.modality
    if modality == kind:
        return
    hint = {
        "text": "a text corpus (--texts, or the sidebar's text choices)",
        "image": "an image folder (--images DIR)",
        "audio": "an audio folder (--audio DIR)",
    }
    raise InputError(
        f"{loaded.info.display_name} reads {modality}, not {kind}: give it {hint[modality]}, or "
        f"choose {'an' if kind[0] in 'aeiou' else 'a'} {kind} model"
    )


_paused = 0
_paused_lock = threading.Lock()
_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside this block (back on when the last thread
    leaves one, if it was on before the first came in).

    Tokenizing a corpus builds a few Python objects per token (ids, masks, offsets), each freed by
    reference counting, and no cycles; but their number triggers full collections that traverse
    every object of the process (a few hundred thousand with a model loaded), each costing more
    than the tokenization itself.
    """
    global _paused, _was_enabled
    with _paused_lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


def tokenize(
    loaded: LoadedModel, texts: tuple[str, ...] | list[str], max_length: int
) -> TokenizedCorpus:
    """Tokenize with truncation; counts the texts that were cut."""
    if not texts:
        raise InputError("no texts to analyse; give at least one non-empty text")
    check_modality(loaded, "text")  # every text view on an image or audio model: one line
    model_max = loaded.info.max_positions  # None: no limit (a config's -1 too)
    if model_max and max_length > model_max:
        max_length = int(model_max)
    with collector_paused():
        tokenized = _tokenize(loaded.tokenizer, texts, max_length)
    if not loaded.layout.pad_with_mask:  # padding moves this model's tokens: equal lengths only
        tokenized = dataclasses.replace(tokenized, group=tokenized.lengths)
    return tokenized


def _tokenize(tok, texts: tuple[str, ...] | list[str], max_length: int) -> TokenizedCorpus:
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


def is_punct(token: str) -> bool:
    core = token.removeprefix("##").lstrip("Ġ▁")
    return bool(core) and all(unicodedata.category(c)[0] in "PS" for c in core)
