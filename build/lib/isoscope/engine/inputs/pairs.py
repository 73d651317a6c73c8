"""The labelled CSV inputs of the similarity views (:mod:`isoscope.analysis.similarity`):
sentence pairs with gold scores (STS) and word-sense rows (WiC), read with the checks every user
file gets (:mod:`isoscope.engine.inputs.files`), and the bundled samples.

``sentence1,sentence2,score`` (with that header, or the header-less three-column STS-B
distribution) and ``word,context1,context2,same_sense`` (labels 1/0, true/false, yes/no or
same/different); tab-separated when the first line has tabs and no commas.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isoscope.engine.environment import assets_dir
from isoscope.engine.errors import InputError
from isoscope.engine.inputs.files import decode_text, read_file

ASSETS_DIR = assets_dir()
STS_SAMPLE = ASSETS_DIR / "sts_sample.csv"
WIC_EXAMPLES = ASSETS_DIR / "wic_examples.csv"
MAX_ROWS = 20_000
PAIR_COLUMNS = ("sentence1", "sentence2", "score")
WIC_COLUMNS = ("word", "context1", "context2", "same_sense")
TRUE_LABELS = {"1", "true", "t", "yes", "y", "same", "1.0"}
FALSE_LABELS = {"0", "false", "f", "no", "n", "different", "0.0"}


@dataclass(frozen=True)
class SentencePairs:
    """Sentence pairs with gold similarity scores (float64 (n,))."""

    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    scores: np.ndarray
    name: str

    def __len__(self) -> int:
        return len(self.sentence1)

    @property
    def sha(self) -> str:
        h = hashlib.sha256()
        for a, b, s in zip(self.sentence1, self.sentence2, self.scores.tolist(), strict=True):
            h.update(f"{a}\x00{b}\x00{s!r}\x01".encode())
        return h.hexdigest()[:20]


@dataclass(frozen=True)
class WordSenseRows:
    """Rows (word, context1, context2, same_sense); ``same_sense`` is bool (n,)."""

    word: tuple[str, ...]
    context1: tuple[str, ...]
    context2: tuple[str, ...]
    same_sense: np.ndarray
    name: str

    def __len__(self) -> int:
        return len(self.word)

    @property
    def sha(self) -> str:
        h = hashlib.sha256()
        for row in zip(
            self.word, self.context1, self.context2, self.same_sense.tolist(), strict=True
        ):
            h.update(("\x00".join(map(str, row)) + "\x01").encode())
        return h.hexdigest()[:20]


def _text(source: bytes | str | Path, name: str | None) -> tuple[str, str]:
    raw, name = read_file(source, name, "a CSV file")
    if not raw.strip():
        raise InputError(f"{name} is empty; give a CSV file with a header line and at least 3 rows")
    return decode_text(raw, name, ".csv"), name


def _records(text: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every non-blank CSV record; tab-separated when the first line has
    tabs and no commas."""
    first = text.splitlines()[0] if text else ""
    delimiter = "\t" if "\t" in first and "," not in first else ","
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    out = []
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                out.append((reader.line_num, [c.strip() for c in cells]))
    except csv.Error as exc:
        raise InputError(
            f"line {reader.line_num}: not valid CSV ({exc}); check the quoting"
        ) from None
    return out


def _columns(
    header: list[str], wanted: tuple[str, ...], name: str, parse_last: Callable[[str], object]
) -> tuple[list[int], bool]:
    """Column positions of ``wanted`` and whether the first line is a header: from a header
    line, or the first columns in order (and False) for header-less files whose first row
    already parses (the STS-B distribution has no header)."""
    lowered = [h.lower().replace(" ", "_") for h in header]
    present = [w for w in wanted if w in lowered]
    if len(present) == len(wanted):
        return [lowered.index(w) for w in wanted], True
    if present:
        missing = [w for w in wanted if w not in lowered]
        raise InputError(
            f"{name}: missing column(s) {', '.join(missing)}; the header has {', '.join(header)}. "
            f"Give a header line {','.join(wanted)}"
        )
    if len(header) >= len(wanted):
        try:
            parse_last(header[len(wanted) - 1])
            return list(range(len(wanted))), False
        except InputError:
            pass
    raise InputError(
        f"{name}: no header with the columns {', '.join(wanted)} (first line: {', '.join(header)[:120]!r}); "
        f"add the header line {','.join(wanted)}"
    )


def _parse_score(value: str) -> float:
    try:
        score = float(value)
    except ValueError:
        raise InputError(f"score {value!r} is not a number") from None
    if not np.isfinite(score):
        raise InputError(f"score {value!r} is not a finite number")
    return score


def _parse_label(value: str) -> bool:
    v = value.strip().lower()
    if v in TRUE_LABELS:
        return True
    if v in FALSE_LABELS:
        return False
    raise InputError(
        f"same_sense {value!r} is not a label; use 1/0, true/false, yes/no or same/different"
    )


def _rows(source, name, wanted, parse_last) -> tuple[list[tuple[int, list[str]]], str]:
    text, name = _text(source, name)
    records = _records(text)
    if not records:
        raise InputError(
            f"{name} has no rows; give a header line {','.join(wanted)} and at least 3 rows"
        )
    positions, has_header = _columns(records[0][1], wanted, name, parse_last)
    body = records[1:] if has_header else records
    if len(body) > MAX_ROWS:
        raise InputError(
            f"{name} has {len(body):,} rows; at most {MAX_ROWS:,} are accepted, split the file"
        )
    rows = []
    for line, cells in body:
        if len(cells) <= max(positions):
            raise InputError(
                f"{name}, line {line}: expected {len(wanted)} columns ({','.join(wanted)}), found {len(cells)}"
            )
        picked = [cells[p] for p in positions]
        for column, value in zip(wanted[:-1], picked[:-1], strict=True):
            if not value:
                raise InputError(f"{name}, line {line}: {column} is empty")
        try:
            parse_last(picked[-1])
        except InputError as exc:
            raise InputError(f"{name}, line {line}: {exc}") from None
        rows.append((line, picked))
    return rows, name


def evaluated_texts(data: SentencePairs | WordSenseRows) -> tuple[str, ...]:
    """The distinct sentences (or word-sense contexts) an evaluation pools, sorted: the corpus on
    which clip "auto" detects each state's outlier dims, in the CLI and the UI alike."""
    if isinstance(data, SentencePairs):
        return tuple(sorted(set(data.sentence1) | set(data.sentence2)))
    return tuple(sorted(set(data.context1) | set(data.context2)))


def read_pairs_csv(source: bytes | str | Path, name: str | None = None) -> SentencePairs:
    """Sentence pairs from a CSV ``sentence1,sentence2,score`` (header line; other columns ignored),
    or a header-less file with those three columns first (the STS-B distribution)."""
    rows, name = _rows(source, name, PAIR_COLUMNS, _parse_score)
    if len(rows) < 3:
        raise InputError(f"{name} has {len(rows)} pair(s); Spearman's correlation needs at least 3")
    scores = np.array([_parse_score(r[2]) for _, r in rows], dtype=np.float64)
    if np.ptp(scores) == 0:
        raise InputError(
            f"{name}: every gold score is {scores[0]:g}; Spearman's correlation needs scores that differ"
        )
    return SentencePairs(tuple(r[0] for _, r in rows), tuple(r[1] for _, r in rows), scores, name)


def read_word_sense_csv(source: bytes | str | Path, name: str | None = None) -> WordSenseRows:
    """Word-sense rows from a CSV ``word,context1,context2,same_sense`` (labels 1/0, true/false,
    yes/no or same/different), or a header-less file with those four columns first."""
    rows, name = _rows(source, name, WIC_COLUMNS, _parse_label)
    if len(rows) < 2:
        raise InputError(
            f"{name} has {len(rows)} row(s); give at least 2 (ideally dozens, both labels)"
        )
    labels = np.array([_parse_label(r[3]) for _, r in rows], dtype=bool)
    return WordSenseRows(
        tuple(r[0] for _, r in rows),
        tuple(r[1] for _, r in rows),
        tuple(r[2] for _, r in rows),
        labels,
        name,
    )


def sts_sample() -> SentencePairs:
    """The bundled sample of sentence pairs (written for this project, CC0)."""
    return read_pairs_csv(STS_SAMPLE, "bundled sample pairs (CC0)")


def wic_examples() -> WordSenseRows:
    """The bundled word-sense examples (written for this project, CC0)."""
    return read_word_sense_csv(WIC_EXAMPLES, "bundled word-sense examples (CC0)")
