"""Sentence similarity (STS) and word senses (WiC-style) per hidden state, raw vs post-processed.

Luo, Kulmizev & Mao 2021, *Positional Artefacts Propagate Through Masked Language Model
Embeddings* (arXiv 2011.04393), Table 2 and the word-sense experiment:

- **STS**: mean-pool the token vectors of each sentence at every hidden state (all non-padding
  tokens, special tokens included, like sentence-transformers), cosine per pair, Spearman's rank
  correlation x 100 against the gold scores (Cer et al. 2017, STS Benchmark). Raw vs clipped
  (outlier dimensions set to 0), and vs any :mod:`backend.analysis.geometry.postprocess` transformer fitted on the
  pooled vectors of that hidden state.
- **Word senses** (after WiC, Pilehvar & Camacho-Collados 2019, arXiv 1808.09121): for rows
  (word, context1, context2, same_sense) the vectors of the word in both contexts (word pieces
  averaged), cosine per hidden state, and the accuracy of "same sense iff cosine > t" at the best
  threshold t. That best threshold is chosen on the same rows, so the accuracy is optimistic; the
  leave-one-out accuracy (threshold chosen without the row it predicts) is reported beside it.

Inputs are CSV files: ``sentence1,sentence2,score`` (with that header, or the header-less
three-column STS-B distribution) and ``word,context1,context2,same_sense``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from backend.analysis.geometry.isotropy import cosine_rows
from backend.analysis.geometry.outliers import auto_clip_dims
from backend.analysis.geometry.postprocess import ClipDims, make_postprocessor, parse_dims
from backend.engine.device import to_numpy
from backend.engine.environment import assets_dir
from backend.engine.errors import InputError, UnsupportedModelError
from backend.engine.extraction import ExtractionResult, forward_batches, mean_pooled, tokenize
from backend.engine.models import LoadedModel
from backend.engine.naming import hidden_state_names
from backend.engine.params import MAX_FILE_BYTES  # the one limit of every file a user gives
from backend.engine.progress import Progress

ASSETS_DIR = assets_dir()
STS_SAMPLE = ASSETS_DIR / "sts_sample.csv"
WIC_EXAMPLES = ASSETS_DIR / "wic_examples.csv"
MAX_ROWS = 20_000
PAIR_COLUMNS = ("sentence1", "sentence2", "score")
WIC_COLUMNS = ("word", "context1", "context2", "same_sense")
TRUE_LABELS = {"1", "true", "t", "yes", "y", "same", "1.0"}
FALSE_LABELS = {"0", "false", "f", "no", "n", "different", "0.0"}


# ----------------------------------------------------------------------------- reading CSV files


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


def _read_bytes(source: bytes | str | Path, name: str | None) -> tuple[bytes, str]:
    if isinstance(source, bytes | bytearray):
        return bytes(source), name or "uploaded file"
    path = Path(source)
    if not path.is_file():
        raise InputError(
            f"{str(path)!r} does not exist or is not a file; give the path of a CSV file"
        )
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputError(
            f"{path.name} is larger than {MAX_FILE_BYTES // 2**20} MiB; give a smaller CSV file"
        )
    return path.read_bytes(), name or path.name


def _decode(raw: bytes, name: str) -> str:
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(
            f"{name} is larger than {MAX_FILE_BYTES // 2**20} MiB; give a smaller CSV file"
        )
    if not raw.strip():
        raise InputError(f"{name} is empty; give a CSV file with a header line and at least 3 rows")
    if b"\x00" in raw[:8192]:
        raise InputError(
            f"{name} looks like a binary file, not a CSV; save it as UTF-8 text (.csv)"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{name} is not valid UTF-8 (byte {exc.start}); save it as UTF-8 text and try again"
        ) from None


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
) -> tuple[list[int] | None, bool]:
    """Column positions of ``wanted``: from a header line, or (None, False) for header-less files
    whose first row already parses (the STS-B distribution has no header)."""
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
    raw, name = _read_bytes(source, name)
    records = _records(_decode(raw, name))
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


# ----------------------------------------------------------------------------- scoring


def spearman100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman's rank correlation x 100 (scipy.stats.spearmanr; ties get average ranks).
    NaN when either side is constant."""
    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if len(predicted) < 3 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return float("nan")
    return float(100.0 * spearmanr(predicted, gold).statistic)


def top_mean_dims(vectors: np.ndarray, k: int = 2) -> list[int]:
    """The ``k`` dimensions with the largest |mean| over the rows of ``vectors`` (n, d) (ties: lower index)."""
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    return [int(j) for j in np.argsort(-np.abs(mean), kind="stable")[:k]]


def pool_pairs(
    loaded: LoadedModel,
    pairs: SentencePairs,
    max_length: int = 128,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean-pooled vectors of both sides, float64 (S, n, d) each; every distinct sentence is run once."""

    unique = sorted(set(pairs.sentence1) | set(pairs.sentence2))
    where = {s: i for i, s in enumerate(unique)}
    pooled = mean_pooled(
        loaded, unique, max_length=max_length, batch_size=batch_size, progress=progress
    )
    first = pooled[:, [where[s] for s in pairs.sentence1]]
    second = pooled[:, [where[s] for s in pairs.sentence2]]
    return first, second


CLIP_MODES = ("auto", "largest-mean", "none")


def parse_clip(value: str, hidden_size: int | None = None) -> str | list[int]:
    """``--clip`` values: "auto", "largest-mean", "none", or dims "D1,D2,..." (list of ints)."""
    text = str(value).strip().lower()
    if text in CLIP_MODES:
        return text

    dims = parse_dims(text, hidden_size)
    if not dims:
        raise InputError(
            "--clip needs 'auto', 'largest-mean', 'none' or dimension indices such as 223,338"
        )
    return dims


def clip_dims_by_state(
    clip: str | Sequence[int] | Sequence[Sequence[int]],
    pooled1: np.ndarray,
    pooled2: np.ndarray,
    k: int = 2,
    *,
    result: ExtractionResult | None = None,
) -> list[list[int]]:
    """The dims to clip at every hidden state: "auto" = each state's headline outlier dims in the
    extraction ``result`` (:func:`backend.analysis.geometry.outliers.auto_clip_dims`, the meaning of
    "auto" everywhere); "largest-mean" = the ``k`` dims with the largest |mean| over the evaluated
    texts (both sides' pooled vectors) at that state; "none" = []; a list of ints = the same dims
    everywhere; a list of lists = per state."""
    num_states = pooled1.shape[0]
    if isinstance(clip, str):
        if clip == "auto":
            if result is None or result.num_states != num_states:
                raise InputError(
                    "clip 'auto' zeroes each hidden state's outlier dims, detected on an "
                    "extraction of the same model: pass result="
                )
            return auto_clip_dims(result)
        if clip == "largest-mean":
            return [
                top_mean_dims(np.concatenate([pooled1[s], pooled2[s]]), k)
                for s in range(num_states)
            ]
        if clip == "none":
            return [[] for _ in range(num_states)]
        raise InputError(
            f"unknown clip mode {clip!r}; use 'auto', 'largest-mean', 'none' or a list of dims"
        )
    clip = list(clip)
    if clip and isinstance(clip[0], list | tuple | np.ndarray):
        if len(clip) != num_states:
            raise InputError(
                f"got clip dims for {len(clip)} hidden states, the model has {num_states}"
            )
        return [sorted({int(j) for j in dims}) for dims in clip]
    return [sorted({int(j) for j in clip}) for _ in range(num_states)]


def _clip(x: np.ndarray, dims: Sequence[int]) -> np.ndarray:

    return ClipDims(tuple(dims)).fit_transform(x)


def sts_by_state(
    pooled1: np.ndarray,
    pooled2: np.ndarray,
    gold: np.ndarray,
    clip_dims: Sequence[Sequence[int]],
    postprocess: str | None = None,
    params: dict | None = None,
    state_names: Sequence[str] | None = None,
) -> list[dict]:
    """Spearman x 100 per hidden state: raw, clipped (``clip_dims[s]`` zeroed), and optionally after
    ``postprocess`` (a :data:`backend.analysis.geometry.postprocess.POSTPROCESSORS` name) fitted on both sides' pooled
    vectors of that state. One dict per state: index, name, raw, clipped, clipped_dims[, processed]."""

    num_states = pooled1.shape[0]
    names = list(state_names) if state_names is not None else hidden_state_names(num_states - 1)
    rows = []
    for s in range(num_states):
        a, b = pooled1[s], pooled2[s]
        dims = [int(j) for j in clip_dims[s]]
        row = {
            "index": s,
            "name": names[s],
            "raw": spearman100(cosine_rows(a, b), gold),
            "clipped": spearman100(cosine_rows(_clip(a, dims), _clip(b, dims)), gold),
            "clipped_dims": dims,
        }
        if postprocess is not None:
            fitted = make_postprocessor(postprocess, **(params or {})).fit(np.concatenate([a, b]))
            row["processed"] = spearman100(
                cosine_rows(fitted.transform(a), fitted.transform(b)), gold
            )
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- word senses


_WORD_CHARS = r"[^\W_]"


def find_word_span(context: str, word: str) -> tuple[int, int] | None:
    """Character span of ``word`` in ``context`` (case-insensitive): the first whole-word match,
    else the first word that starts with it (an inflection: 'bank' finds 'banks'); None if absent."""
    target = re.escape(word.strip())
    if not target:
        return None
    for pattern in (
        rf"(?<!{_WORD_CHARS}){target}(?!{_WORD_CHARS})",
        rf"(?<!{_WORD_CHARS}){target}{_WORD_CHARS}*",
    ):
        found = re.search(pattern, context, flags=re.IGNORECASE)
        if found:
            return found.start(), found.end()
    return None


def token_span(
    offsets: Sequence[tuple[int, int]], special: Sequence[bool], span: tuple[int, int]
) -> list[int]:
    """Token indices whose character offsets overlap ``span`` (special tokens never)."""
    start, end = span
    return [
        i
        for i, ((s, e), sp) in enumerate(zip(offsets, special, strict=True))
        if not sp and e > s and s < end and e > start
    ]


@dataclass(frozen=True)
class WordSenseVectors:
    """The word's vectors in both contexts, float64 (S, m, d) each, for the m usable rows
    (``rows`` indexes the input rows); ``problems`` says why the other rows were skipped."""

    first: np.ndarray
    second: np.ndarray
    same_sense: np.ndarray
    rows: np.ndarray
    problems: tuple[str, ...]


def word_vectors(
    loaded: LoadedModel,
    data: WordSenseRows,
    max_length: int = 128,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> WordSenseVectors:
    """Average of the word's word-piece vectors in each context, at every hidden state."""

    tok = loaded.tokenizer
    if not getattr(tok, "is_fast", False):
        raise UnsupportedModelError(
            "finding a word's tokens needs a fast tokenizer (with offsets); this model has a slow one"
        )
    contexts = sorted(set(data.context1) | set(data.context2))
    where = {c: i for i, c in enumerate(contexts)}
    tokenized = tokenize(loaded, tuple(contexts), max_length)
    enc = tok(
        contexts, truncation=True, max_length=tokenized.max_length, return_offsets_mapping=True
    )

    problems, requests = [], {}  # requests[context index] = [(row, side, token indices)]
    usable = []
    for r, (word, c1, c2) in enumerate(zip(data.word, data.context1, data.context2, strict=True)):
        spans = []
        for side, context in ((1, c1), (2, c2)):
            found = find_word_span(context, word)
            if found is None:
                problems.append(
                    f"row {r + 1}: {word!r} does not occur in context {side} ({context[:60]!r}); row skipped"
                )
                break
            t = where[context]
            idx = token_span(enc["offset_mapping"][t], tokenized.special[t], found)
            if not idx:
                problems.append(
                    f"row {r + 1}: {word!r} in context {side} lies beyond "
                    f"the first {tokenized.max_length} tokens; row skipped"
                )
                break
            spans.append((t, side, idx))
        else:
            usable.append(r)
            for t, side, idx in spans:
                requests.setdefault(t, []).append((len(usable) - 1, side, idx))
    if not usable:
        raise InputError(f"{data.name}: no usable rows. " + "; ".join(problems[:3]))

    num_states, d = loaded.info.num_layers + 1, loaded.info.hidden_size
    first = np.zeros((num_states, len(usable), d))
    second = np.zeros((num_states, len(usable), d))
    needed = sorted(requests)
    sub = type(tokenized)(
        [tokenized.input_ids[t] for t in needed],
        [tokenized.special[t] for t in needed],
        [tokenized.word_ids[t] for t in needed],
        tokenized.truncated,
        tokenized.max_length,
    )
    for batch_ids, hidden, _ in forward_batches(loaded, sub, batch_size, progress):
        for row_in_batch, b in enumerate(batch_ids):
            for slot, side, idx in requests[needed[b]]:
                vec = to_numpy(hidden[:, row_in_batch, idx, :].double().mean(dim=1))  # (S, d)
                (first if side == 1 else second)[:, slot] = vec
    return WordSenseVectors(
        first, second, data.same_sense[usable], np.array(usable, dtype=np.int64), tuple(problems)
    )


@dataclass(frozen=True)
class ThresholdSweep:
    """Accuracy of 'same sense iff cosine > threshold' for every distinct threshold."""

    thresholds: np.ndarray
    accuracy: np.ndarray
    best_threshold: float
    best_accuracy: float


def threshold_sweep(cosines: np.ndarray, same: np.ndarray) -> ThresholdSweep:
    """Every cut between consecutive distinct cosines (plus below the lowest and above the highest);
    the best threshold is the one with the highest accuracy (the lowest such one on ties)."""
    cosines = np.asarray(cosines, dtype=np.float64)
    same = np.asarray(same, dtype=bool)
    if len(cosines) == 0:
        raise InputError("no rows to sweep a threshold over")
    u = np.unique(cosines)
    thresholds = np.concatenate([[u[0] - 1e-9], (u[:-1] + u[1:]) / 2, [u[-1] + 1e-9]])
    pos = np.sort(cosines[same])
    neg = np.sort(cosines[~same])
    # correct = positives above t + negatives at or below t
    correct = (len(pos) - np.searchsorted(pos, thresholds, side="right")) + np.searchsorted(
        neg, thresholds, side="right"
    )
    accuracy = correct / len(cosines)
    best = int(np.argmax(accuracy))
    return ThresholdSweep(thresholds, accuracy, float(thresholds[best]), float(accuracy[best]))


def loo_accuracy(cosines: np.ndarray, same: np.ndarray) -> float:
    """Leave-one-out accuracy: each row is predicted with the best threshold of the other rows."""
    cosines = np.asarray(cosines, dtype=np.float64)
    same = np.asarray(same, dtype=bool)
    n = len(cosines)
    if n < 2:
        return float("nan")
    hits = 0
    for i in range(n):
        keep = np.arange(n) != i
        t = threshold_sweep(cosines[keep], same[keep]).best_threshold
        hits += int((cosines[i] > t) == same[i])
    return hits / n


def word_sense_by_state(
    vectors: WordSenseVectors,
    clip_dims: Sequence[Sequence[int]],
    fitted: Sequence | None = None,
    state_names: Sequence[str] | None = None,
) -> list[dict]:
    """Per hidden state: best-threshold accuracy, its threshold and the leave-one-out accuracy, raw
    and clipped (``clip_dims[s]`` zeroed), and after ``fitted[s]`` (a fitted post-processor) if given."""

    num_states = vectors.first.shape[0]
    names = list(state_names) if state_names is not None else hidden_state_names(num_states - 1)
    rows = []
    for s in range(num_states):
        a, b = vectors.first[s], vectors.second[s]
        dims = [int(j) for j in clip_dims[s]]
        variants = {"raw": (a, b), "clipped": (_clip(a, dims), _clip(b, dims))}
        if fitted is not None:
            variants["processed"] = (fitted[s].transform(a), fitted[s].transform(b))
        row = {"index": s, "name": names[s], "clipped_dims": dims}
        for label, (x, y) in variants.items():
            cos = cosine_rows(x, y)
            sweep = threshold_sweep(cos, vectors.same_sense)
            row[f"{label}_accuracy"] = sweep.best_accuracy
            row[f"{label}_threshold"] = sweep.best_threshold
            row[f"{label}_loo_accuracy"] = loo_accuracy(cos, vectors.same_sense)
        rows.append(row)
    return rows


def word_sense_sweeps(
    vectors: WordSenseVectors, state: int, clip_dims: Sequence[int], fitted=None
) -> dict[str, ThresholdSweep]:
    """The threshold sweeps behind :func:`word_sense_by_state` at one hidden state (for plotting)."""
    a, b = vectors.first[state], vectors.second[state]
    variants = {"raw": (a, b), "clipped": (_clip(a, clip_dims), _clip(b, clip_dims))}
    if fitted is not None:
        variants["processed"] = (fitted.transform(a), fitted.transform(b))
    return {
        k: threshold_sweep(cosine_rows(x, y), vectors.same_sense) for k, (x, y) in variants.items()
    }


def fit_on_token_sample(
    result: ExtractionResult, postprocess: str, params: dict | None = None
) -> list:
    """One :mod:`backend.analysis.geometry.postprocess` transformer per hidden state, fitted on that state's token
    sample of an ExtractionResult (the corpus), to apply to word vectors from other texts."""

    return [
        make_postprocessor(postprocess, **(params or {})).fit(
            np.asarray(result.sample_vectors[s], dtype=np.float64)
        )
        for s in range(result.num_states)
    ]
