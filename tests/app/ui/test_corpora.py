"""The selected corpus: pasted text, an upload kept in memory under its hash (and an actionable
message once it is gone), the bundled sample; and the one message when a result's media items
are not at hand."""

from __future__ import annotations

import pytest

from isoscope.engine.errors import IsoscopeError
from isoscope.ui.frame.selection import Selection
from isoscope.ui.work.corpora import get_corpus, media_corpus_for, media_corpus_of, remember_upload


def test_pasted_text_is_one_text_per_line():
    corpus = get_corpus(Selection(corpus_kind="paste", corpus_text="The bank.\nThe river bank."))
    assert list(corpus.texts) == ["The bank.", "The river bank."]


def test_an_upload_is_read_from_memory_by_its_hash_and_a_lost_one_says_what_to_do():
    raw = b"first line\nsecond line\nthird line\n"
    remember_upload("sha-planted", "notes.txt", raw)
    corpus = get_corpus(Selection(corpus_kind="upload", corpus_file_sha="sha-planted"))
    assert list(corpus.texts) == ["first line", "second line", "third line"]
    with pytest.raises(IsoscopeError, match="no longer in memory; upload it again"):
        get_corpus(Selection(corpus_kind="upload", corpus_file_sha="never-uploaded"))


def test_the_default_is_the_bundled_sample():
    from isoscope.engine.inputs.corpus import bundled_corpus

    assert get_corpus(Selection()).sha == bundled_corpus().sha


def test_a_media_result_whose_items_are_elsewhere_names_the_folder_to_choose():
    class _Result:  # a saved image analysis; the sidebar's corpus is the bundled text
        input_kind = "image"
        corpus_sha = "not-the-sidebars"

    class _Text:
        input_kind = "text"
        corpus_sha = ""

    assert media_corpus_of(_Text()) is None
    with pytest.raises(IsoscopeError, match="choose their folder in the sidebar .* to compare"):
        media_corpus_for(_Result(), "compare")
