"""Corpora: bundled, pasted, uploaded .txt/.csv/.jsonl; bad files give actionable InputErrors and
every applied limit leaves a notice."""

from __future__ import annotations

import json

import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.inputs import corpus as corpus_mod
from isoscope.engine.inputs.corpus import (
    Corpus,
    bundled_corpus,
    corpus_from_bytes,
    corpus_from_text,
    load_corpus_file,
)


def test_bundled_corpus_is_a_few_hundred_sentences():
    corpus = bundled_corpus()
    assert 200 <= len(corpus) <= 2000
    assert corpus.notices == ()
    assert all(t == t.strip() and t for t in corpus.texts)
    assert len(corpus.sha) == 20 and corpus.sha == bundled_corpus().sha


def test_bundled_corpus_is_read_once_per_version_of_the_file(tmp_path, monkeypatch):
    path = tmp_path / "corpus.txt"
    path.write_text("one\ntwo\n")
    monkeypatch.setattr(corpus_mod, "BUNDLED_CORPUS", path)
    corpus_mod._bundled_corpus.cache_clear()
    first = bundled_corpus()
    assert first is bundled_corpus() and first.texts == ("one", "two")
    path.write_text("one\ntwo\nthree and more\n")  # a new version (size and time) is read again
    assert bundled_corpus().texts == ("one", "two", "three and more")
    corpus_mod._bundled_corpus.cache_clear()


def test_txt_one_text_per_line_skips_blank_lines_and_collapses_space():
    corpus = corpus_from_bytes(b"first  text\n\n   \nsecond\ttext\r\n", "a.txt")
    assert corpus.texts == ("first text", "second text")
    assert corpus.name == "a.txt"


def test_utf8_bom_and_non_ascii_are_fine():
    corpus = corpus_from_bytes("\ufeffcafé\nnaïve – ok\n".encode(), "a.txt")
    assert corpus.texts == ("café", "naïve – ok")


def test_csv_uses_the_text_column_case_insensitively():
    raw = b'id,Text,label\n1,"Hello, world",a\n2,,b\n3,Second one,c\n'
    assert corpus_from_bytes(raw, "data.csv").texts == ("Hello, world", "Second one")


def test_csv_without_text_column_is_refused():
    with pytest.raises(InputError, match="no 'text' column .*found: id, body"):
        corpus_from_bytes(b"id,body\n1,hello\n", "data.csv")


def test_jsonl_reads_text_fields_and_notes_skipped_lines():
    lines = [
        json.dumps({"text": "one"}),
        "",
        json.dumps({"text": 3}),
        json.dumps(["x"]),
        json.dumps({"text": "two"}),
    ]
    corpus = corpus_from_bytes("\n".join(lines).encode(), "d.jsonl")
    assert corpus.texts == ("one", "two")
    assert any("2 line(s) without a string 'text' field" in n for n in corpus.notices)


def test_malformed_jsonl_names_the_line():
    with pytest.raises(InputError, match="line 2 is not valid JSON"):
        corpus_from_bytes(b'{"text": "ok"}\n{"text": broken\n', "d.jsonl")


@pytest.mark.parametrize("raw", [b"", b"   \n\n  \t\n"])
def test_empty_file_is_refused(raw):
    with pytest.raises(InputError, match="empty"):
        corpus_from_bytes(raw, "empty.txt")


def test_binary_file_is_refused():
    with pytest.raises(InputError, match="binary"):
        corpus_from_bytes(b"PK\x03\x04\x00\x00\x08\x00binary", "archive.txt")


def test_non_utf8_file_is_refused_with_the_byte_offset():
    with pytest.raises(InputError, match=r"not valid UTF-8 \(byte 3\)"):
        corpus_from_bytes("abcé\n".encode("latin-1"), "latin.txt")


def test_unsupported_suffix_is_refused():
    with pytest.raises(InputError, match="unsupported file type .pdf"):
        corpus_from_bytes(b"hello", "paper.pdf")


def test_text_count_limit_leaves_a_notice():
    raw = "\n".join(f"text {i}" for i in range(30)).encode()
    corpus = corpus_from_bytes(raw, "many.txt", max_texts=10)
    assert len(corpus) == 10 and corpus.texts[-1] == "text 9"
    assert any("only the first 10 of 30 texts" in n for n in corpus.notices)


def test_long_texts_are_cut_with_a_notice(monkeypatch):
    monkeypatch.setattr(corpus_mod, "MAX_CHARS_PER_TEXT", 5)
    corpus = corpus_from_text("abcdefgh\nabc")
    assert corpus.texts == ("abcde", "abc")
    assert any("1 text(s) longer than 5 characters were cut" in n for n in corpus.notices)


def test_file_size_limit(monkeypatch, tmp_path):
    from isoscope.engine.inputs import files

    monkeypatch.setattr(files, "MAX_FILE_BYTES", 100)  # the one limit of every user file
    with pytest.raises(InputError, match="limit is"):
        corpus_from_bytes(b"x" * 101, "big.txt")
    path = tmp_path / "big.txt"
    path.write_bytes(b"word " * 50)
    with pytest.raises(InputError, match="limit is"):
        load_corpus_file(path)


def test_pasted_text():
    assert corpus_from_text("a\nb\n").texts == ("a", "b")
    for empty in ("", "  \n ", None):
        with pytest.raises(InputError, match="pasted text is empty"):
            corpus_from_text(empty)


def test_load_corpus_file_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_corpus_file(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="is a folder"):
        load_corpus_file(tmp_path)
    odd = tmp_path / "notes.md"  # unknown suffix is read as one text per line
    odd.write_text("one\ntwo\n")
    assert load_corpus_file(odd).texts == ("one", "two")


def test_corpus_object_rules():
    with pytest.raises(InputError):
        Corpus((), "nothing")
    a, b = Corpus(("x", "y"), "a"), Corpus(("x", "y"), "b")
    assert a.sha == b.sha  # content hash, independent of the name
    assert Corpus(("xy",), "a").sha != Corpus(("x", "y"), "a").sha


def test_parquet_text_column_and_folder_of_uneven_shards_in_path_order(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "shards"
    (folder / "b").mkdir(parents=True)
    pq.write_table(
        pa.table({"id": [1, 2, 3], "Text": ["p one", None, "p  two"]}), folder / "a.parquet"
    )
    (folder / "b" / "c.txt").write_text("t one\n\nt two\nt three\n")
    (folder / "b" / "d.csv").write_text("text\nc one\n")
    (folder / "e.jsonl").write_text("")  # empty shard: adds nothing
    (folder / ".hidden.txt").write_text("never read\n")
    (folder / "notes.md").write_text("not a shard\n")
    corpus = load_corpus_file(folder)
    assert corpus.texts == ("p one", "p two", "t one", "t two", "t three", "c one")
    assert corpus.name == "shards"
    assert corpus.notices == ("a.parquet: 1 row(s) with a null 'text' were skipped",)
    single = corpus_from_bytes((folder / "a.parquet").read_bytes(), "a.parquet")
    assert single.texts == ("p one", "p two")


def test_bad_parquet_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "no_text.parquet")
    with pytest.raises(InputError, match="no 'text' column .*found: body"):
        load_corpus_file(tmp_path / "no_text.parquet")
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "ints.parquet")
    with pytest.raises(InputError, match="not strings"):
        load_corpus_file(tmp_path / "ints.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        load_corpus_file(tmp_path / "junk.parquet")
