"""The selected corpus: the bundled sample, pasted text, an uploaded file kept in memory under its
hash, or a folder of images or audio, and the items of the corpus a result read.
"""

from __future__ import annotations

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.inputs.corpus import (
    Corpus,
    bundled_corpus,
    corpus_from_bytes,
    corpus_from_text,
)
from isoscope.engine.lru import LRU
from isoscope.ui.frame.selection import Selection, get_selection
from isoscope.ui.server import access


@st.cache_resource(max_entries=1, show_spinner=False)
def _uploaded_store() -> LRU:
    """Uploaded corpus files (name, bytes) by hash, one store per process: the last 8, <= 200 MiB."""
    return LRU(8, max_bytes=200 << 20, weigh=lambda item: len(item[1]))


def remember_upload(sha: str, name: str, raw: bytes) -> None:
    """Keep an uploaded corpus file in memory under its hash (the selection holds only the hash)."""
    _uploaded_store().put(sha, (name, raw))


def get_corpus(selection: Selection | None = None) -> Corpus:
    """The selected corpus (images and audio: :func:`isoscope.ui.work.media.media_corpus`); on a shared server
    within the per-visitor text limit."""
    from isoscope.ui.work.media import MEDIA_KINDS, media_corpus

    sel = selection or get_selection()
    if sel.corpus_kind == "paste":
        corpus = corpus_from_text(sel.corpus_text)
    elif sel.corpus_kind == "upload":
        stored = _uploaded_store().get(sel.corpus_file_sha)
        if stored is None:
            raise IsoscopeError("the uploaded file is no longer in memory; upload it again")
        corpus = corpus_from_bytes(stored[1], stored[0])
    elif sel.corpus_kind in MEDIA_KINDS:
        return media_corpus(sel.corpus_kind, sel.corpus_text)
    else:
        return bundled_corpus()
    if access.shared():
        access.policy().limits.check_texts(len(corpus))
    return corpus


def media_corpus_of(result: ExtractionResult):
    """The sidebar's image / audio corpus when ``result`` read it (a result names its items by
    path only, so views that rerun the model take them from here); None for text, and for a saved
    analysis whose items are not the sidebar's."""

    if result.input_kind == "text":
        return None
    corpus = get_corpus()
    return corpus if corpus.sha == result.corpus_sha else None


def media_corpus_for(result: ExtractionResult, purpose: str):
    """:func:`media_corpus_of`, or one message when the items are not at hand (a result names
    them by path only): ``purpose`` says what choosing their folder would allow."""
    from isoscope.engine.inputs.media import KIND_NOUNS

    corpus = media_corpus_of(result)
    if corpus is None:
        raise IsoscopeError(
            f"this analysis keeps only the names of its {KIND_NOUNS[result.input_kind]}; choose "
            f"their folder in the sidebar and run the analysis to {purpose}"
        )
    return corpus


def media_items(result: ExtractionResult) -> tuple | None:
    """The items of :func:`media_corpus_of` (None for text or when they are not at hand)."""
    corpus = media_corpus_of(result)
    return None if corpus is None else corpus.items
