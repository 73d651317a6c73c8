"""The labelled CSV readers (isoscope.engine.inputs.pairs): sentence pairs and word-sense rows, with and
without a header, every error saying what and where, and the bundled samples."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.similarity import find_word_span
from isoscope.engine.errors import InputError
from isoscope.engine.inputs import files
from isoscope.engine.inputs.pairs import (
    SentencePairs,
    evaluated_texts,
    read_pairs_csv,
    read_word_sense_csv,
    sts_sample,
    wic_examples,
)


def test_read_pairs_with_header_headerless_and_tabs():
    text = b'sentence1,sentence2,score,genre\n"A man, tall.",A tall man.,4.5,x\nA cat.,A dog.,1\nRain.,Sun.,0\n'
    pairs = read_pairs_csv(text, "x.csv")
    assert pairs.sentence1[0] == "A man, tall." and list(pairs.scores) == [4.5, 1.0, 0.0]
    headerless = read_pairs_csv(b"A.,B.,1.0\nC.,D.,2.5\nE.,F.,3\n", "stsb.csv")
    assert len(headerless) == 3 and headerless.scores[1] == 2.5
    tabs = read_pairs_csv(b"score\tsentence2\tsentence1\n1\tb\ta\n2\td\tc\n3\tf\te\n", "t.tsv")
    assert tabs.sentence1 == ("a", "c", "e") and list(tabs.scores) == [1, 2, 3]
    assert pairs.sha != headerless.sha


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "empty"),
        (b"   \n\n", "empty"),
        (b"\x00\x01PK\x03\x04binary", "binary"),
        (b"\xff\xfe\xfa bad", "UTF-8"),
        (b"sentence1,score\na,1\nb,2\nc,3\n", "missing column.*sentence2"),
        (b"text,label\na,1\n", "no header"),
        (
            b"sentence1,sentence2,score\na,b,1\nc,d,high\ne,f,2\n",
            "line 3: score 'high' is not a number",
        ),
        (b"sentence1,sentence2,score\na,b,1\nc,d\ne,f,2\n", "line 3: expected 3 columns"),
        (b"sentence1,sentence2,score\na,,1\n", "line 2: sentence2 is empty"),
        (b"sentence1,sentence2,score\na,b,1\nc,d,2\n", "at least 3"),
        (b"sentence1,sentence2,score\na,b,1\nc,d,1\ne,f,1\n", "differ"),
        (b"sentence1,sentence2,score\na,b,nan\n", "finite"),
    ],
)
def test_read_pairs_errors_say_what_and_where(raw, message):
    with pytest.raises(InputError, match=message):
        read_pairs_csv(raw, "upload.csv")


def test_read_pairs_from_a_missing_path():
    with pytest.raises(InputError, match="does not exist"):
        read_pairs_csv("/no/such/file.csv")


def test_read_word_sense_rows_and_errors():
    rows = read_word_sense_csv(
        b"word,context1,context2,same_sense\nbank,a bank,the bank,yes\nbat,a bat,my bat,0\n"
    )
    assert rows.word == ("bank", "bat") and list(rows.same_sense) == [True, False]
    with pytest.raises(InputError, match="line 2: same_sense 'maybe'"):
        read_word_sense_csv(b"word,context1,context2,same_sense\nbank,a,b,maybe\nbat,a,b,1\n")
    with pytest.raises(InputError, match="missing column.*same_sense"):
        read_word_sense_csv(b"word,context1,context2\nbank,a,b\n")


def test_bundled_examples_are_valid_and_balanced():
    pairs = sts_sample()
    assert 30 <= len(pairs) <= 60 and pairs.scores.min() >= 0 and pairs.scores.max() <= 5
    wic = wic_examples()
    assert 50 <= len(wic) <= 80
    assert wic.same_sense.mean() == pytest.approx(0.5)
    for word, c1, c2 in zip(wic.word, wic.context1, wic.context2, strict=True):
        assert find_word_span(c1, word) is not None and find_word_span(c2, word) is not None, word
    assert {"bank", "bat", "spring", "pitch", "key"} <= set(wic.word)


def test_the_one_size_limit_applies_to_uploads_and_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 2**20)
    big = b"sentence1,sentence2,score\n" + b"a,b,1\n" * 200_000
    with pytest.raises(InputError, match="upload.csv is 1.1 MiB; the limit is 1 MiB"):
        read_pairs_csv(big, "upload.csv")
    path = tmp_path / "big.csv"
    path.write_bytes(big)
    with pytest.raises(InputError, match="big.csv is 1.1 MiB; the limit is 1 MiB"):
        read_word_sense_csv(path)


def test_evaluated_texts_are_the_distinct_sentences_sorted():
    """The corpus clip 'auto' detects outlier dims on, for the CLI and the UI alike."""

    pairs = SentencePairs(("b", "a", "b"), ("c", "a", "d"), np.array([1.0, 2.0, 3.0]), "p")
    assert evaluated_texts(pairs) == ("a", "b", "c", "d")
