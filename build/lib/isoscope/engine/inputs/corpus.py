"""Corpora: the bundled sample, pasted text, uploaded .txt / .csv / .jsonl / .parquet files, and
folders of such shards (read in sorted path order, so text indices never depend on who reads them).

A :class:`Corpus` is an immutable tuple of texts plus the notices of every limit that was applied
(shown to the user). Token-level limits (``max_length``) are applied later, at tokenization.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from isoscope.engine.environment import assets_dir
from isoscope.engine.errors import InputError
from isoscope.engine.inputs.files import (
    check_bytes,
    decode_text,
    files_under,
    read_capped,
    regular_file_stat,
    unreadable,
)

ASSETS_DIR = assets_dir()
BUNDLED_CORPUS = ASSETS_DIR / "sample_corpus.txt"
BUNDLED_NAME = "bundled sample corpus (320 sentences, CC0)"

MAX_TEXTS = 50_000
MAX_SHARDS = 10_000  # files in a folder corpus: bounds the walk as well as the reading
MAX_CHARS_PER_TEXT = 20_000  # far beyond any max_length; keeps tokenization bounded
TEXT_SUFFIXES = (".txt", ".csv", ".jsonl", ".parquet")


@dataclass(frozen=True)
class Corpus:
    """Texts to analyse (non-empty, stripped) and the notices of limits applied while reading."""

    texts: tuple[str, ...]
    name: str
    notices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.texts:
            raise InputError(f"{self.name}: no non-empty texts; give at least one line of text")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def kind(self) -> str:
        """The modality; images and audio are :class:`isoscope.engine.inputs.media.MediaCorpus`."""
        return "text"

    @functools.cached_property  # asked on every page run; the texts never change
    def sha(self) -> str:
        """Content hash used in cache keys (independent of the name)."""
        h = hashlib.sha256()
        for text in self.texts:
            h.update(text.encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()[:20]


def _finish(texts: list[str], name: str, notices: list[str], max_texts: int) -> Corpus:
    cleaned = []
    long_cut = 0
    for text in texts:
        text = " ".join(str(text).split())
        if not text:
            continue
        if len(text) > MAX_CHARS_PER_TEXT:
            text = text[:MAX_CHARS_PER_TEXT]
            long_cut += 1
        cleaned.append(text)
    if not cleaned:
        raise InputError(f"{name}: no non-empty texts found; give at least one line of text")
    if long_cut:
        notices.append(f"{long_cut} text(s) longer than {MAX_CHARS_PER_TEXT:,} characters were cut")
    if len(cleaned) > max_texts:
        notices.append(f"only the first {max_texts:,} of {len(cleaned):,} texts are used (limit)")
        cleaned = cleaned[:max_texts]
    return Corpus(tuple(cleaned), name, tuple(notices))


def corpus_from_text(text: str, name: str = "pasted text", max_texts: int = MAX_TEXTS) -> Corpus:
    """Pasted text: one text per line."""
    if text is None or not text.strip():
        raise InputError(
            "the pasted text is empty; type or paste at least one sentence (one text per line)"
        )
    return _finish(text.splitlines(), name, [], max_texts)


def corpus_from_bytes(raw: bytes, filename: str, max_texts: int = MAX_TEXTS) -> Corpus:
    """An uploaded file: ``.txt`` (one text per line), ``.csv``, ``.jsonl`` or ``.parquet`` (a
    ``text`` column)."""
    texts, notices = texts_from_bytes(raw, filename)
    return _finish(texts, filename, notices, max_texts)


def texts_from_bytes(raw: bytes, filename: str) -> tuple[list[str], list[str]]:
    """The raw texts of one file (before cleaning and limits) and the notices of skipped rows."""
    suffix = Path(filename).suffix.lower()
    if suffix not in TEXT_SUFFIXES:
        raise InputError(
            f"{filename}: unsupported file type {suffix or '(none)'}; use .txt, .csv, .jsonl or .parquet"
        )
    check_bytes(raw, filename)
    if not raw.strip():
        raise InputError(f"{filename} is empty; give at least one line of text")
    notices: list[str] = []
    if suffix == ".parquet":
        return _read_parquet_texts(raw, filename, notices), notices
    content = decode_text(raw, filename, ".txt, .csv or .jsonl")
    if suffix == ".txt":
        texts = content.splitlines()
    elif suffix == ".csv":
        texts = _read_csv_texts(content, filename)
    else:
        texts = _read_jsonl_texts(content, filename, notices)
    return texts, notices


def _read_parquet_texts(raw: bytes, filename: str, notices: list[str]) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(raw))
    except (pa.ArrowException, OSError) as exc:
        raise InputError(
            f"{filename}: not a readable Parquet file ({exc}); write it with pandas or pyarrow"
        ) from None
    names = parquet.schema_arrow.names
    lowered = [n.strip().lower() for n in names]
    if "text" not in lowered:
        raise InputError(
            f"{filename}: no 'text' column (found: {', '.join(names) or 'none'}); add a string column named text"
        )
    column = parquet.read(columns=[names[lowered.index("text")]]).column(0)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise InputError(
            f"{filename}: the 'text' column holds {column.type}, not strings; store the texts as strings"
        )
    values = column.to_pylist()
    missing = sum(v is None for v in values)
    if missing:
        notices.append(f"{missing} row(s) with a null 'text' were skipped")
    return [v for v in values if v is not None]


def _read_csv_texts(content: str, filename: str) -> list[str]:
    try:
        reader = csv.DictReader(io.StringIO(content))
        names = list(reader.fieldnames or [])
        fields = [f.strip().lower() for f in names]
        if "text" not in fields:
            raise InputError(
                f"{filename}: no 'text' column (found: {', '.join(fields) or 'none'}); "
                "add a header row with a column named text"
            )
        key = names[fields.index("text")]
        return [row.get(key) or "" for row in reader]
    except csv.Error as exc:
        raise InputError(
            f"{filename}: malformed CSV ({exc}); check quoting and the header row"
        ) from None


def _read_jsonl_texts(content: str, filename: str, notices: list[str]) -> list[str]:
    texts: list[str] = []
    bad = 0
    for number, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise InputError(
                f'{filename}: line {number} is not valid JSON; each line must be an object like {{"text": "..."}}'
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            bad += 1
            continue
        texts.append(record["text"])
    if bad:
        notices.append(f"{bad} line(s) without a string 'text' field were skipped")
    return texts


def corpus_files(path: str | Path) -> list[Path]:
    """The files of a corpus: ``path`` itself, or a folder's .txt/.csv/.jsonl/.parquet shards
    (recursively, hidden files and symlinked folders skipped) in sorted relative-path order: the
    order of text indices. A path that is neither a regular file nor a folder (a FIFO, a device),
    a folder that cannot be read, or one with more than :data:`MAX_SHARDS` shards is refused in
    one line."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise InputError(f"text file {str(path)!r} does not exist") from None
        raise unreadable(path, exc, "a text file or a folder of them") from None
    if not stat.S_ISDIR(mode):
        regular_file_stat(path, "a text file (.txt, .csv, .jsonl, .parquet) or a folder of them")
        return [path]
    found = files_under(path, "a folder of text files", MAX_SHARDS, TEXT_SUFFIXES)
    if not found:
        raise InputError(
            f"{str(path)!r} is a folder with no .txt, .csv, .jsonl or .parquet files; pass a corpus "
            "file or a folder of such shards"
        )
    return found


def corpus_from_shards(
    shards: list[tuple[str, list[str], list[str]]], name: str, max_texts: int = MAX_TEXTS
) -> Corpus:
    """One corpus from ``(file name, raw texts, notices)`` per shard, in the given order."""
    texts: list[str] = []
    notices: list[str] = []
    for shard_name, shard_texts, shard_notices in shards:
        texts.extend(shard_texts)
        notices.extend(f"{shard_name}: {n}" if len(shards) > 1 else n for n in shard_notices)
    return _finish(texts, name, notices, max_texts)


def load_corpus_file(path: str | Path, max_texts: int = MAX_TEXTS) -> Corpus:
    """Read a corpus file, or a folder of shards, from disk (the CLI's ``--texts``); every file
    through :func:`isoscope.engine.inputs.files.read_capped` (regular files only, bounded)."""
    path = Path(path)
    files = corpus_files(path)
    if path.is_dir():
        shards = []
        for file in files:
            raw = read_capped(file, "a text file")
            # an empty shard adds no texts (uneven shards are normal); a bad one is still refused
            shards.append(
                (file.name, *texts_from_bytes(raw, file.name))
                if raw.strip()
                else (file.name, [], [])
            )
        return corpus_from_shards(shards, path.name or str(path), max_texts)
    suffix = path.suffix.lower()
    name = path.name if suffix in TEXT_SUFFIXES else path.name + ".txt"
    return corpus_from_bytes(read_capped(path, "a text file"), name, max_texts)


def bundled_corpus() -> Corpus:
    """The sample corpus shipped in ``assets/`` (CC0; see assets/SAMPLE_CORPUS_LICENSE.md), read
    once per version of the file (every page run of every session asks for it)."""
    stat = Path(BUNDLED_CORPUS).stat()
    return _bundled_corpus(stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=2)
def _bundled_corpus(_mtime_ns: int, _size: int) -> Corpus:
    corpus = load_corpus_file(BUNDLED_CORPUS)
    return Corpus(corpus.texts, BUNDLED_NAME, corpus.notices)
