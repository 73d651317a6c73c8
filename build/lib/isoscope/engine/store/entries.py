"""What an extraction's cache entry is: its key (:func:`cache_key`: what determines the result)
and the result as named arrays, both ways (:func:`result_arrays`, :func:`result_from_arrays`),
read without pickle. The folder that keeps the entries: :mod:`isoscope.engine.store.cache`.

Every entry carries the record its key is the hash of (:data:`SOURCE_MEMBER`: for an extraction
the model fingerprint, the corpus hash, every setting and the extraction code's version), so a
reader can check that a file is the entry of the key it asked for (:func:`entry_mismatch`) and
that the result inside says the same (:func:`result_mismatch`): a file copied over another key's,
or a record edited afterwards, is refused rather than served.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from isoscope.engine.extraction import (
    EXTRACT_VERSION,
    ExtractionResult,
    ExtractionSettings,
    TokenTable,
)

_ARRAYS = (
    "mean",
    "variance",
    "min",
    "max",
    "mean_abs",
    "argmin_count",
    "argmax_count",
    "sample_vectors",
    "sample_index",
)


SOURCE_MEMBER = "computed_from"  # the array holding the JSON record an entry's key hashes


def entry_key(computed_from: Mapping[str, Any]) -> str:
    """The cache key of an entry computed from ``computed_from`` (a JSON-able record)."""
    payload = json.dumps(computed_from, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def key_source(
    model_fingerprint: str, corpus_sha: str, settings: ExtractionSettings, kind: str = "extract"
) -> dict[str, Any]:
    """What an extraction is computed from: the record its key hashes and its entry carries."""
    return {
        "kind": kind,
        "model": model_fingerprint,
        "corpus": corpus_sha,
        "settings": settings.to_dict(),
        "v": EXTRACT_VERSION,
    }


def cache_key(
    model_fingerprint: str, corpus_sha: str, settings: ExtractionSettings, kind: str = "extract"
) -> str:
    return entry_key(key_source(model_fingerprint, corpus_sha, settings, kind))


def result_source(result: ExtractionResult) -> dict[str, Any]:
    """The record ``result`` says it was computed from (its own fingerprint, corpus, settings)."""
    return key_source(result.model_fingerprint, result.corpus_sha, result.settings)


def source_array(computed_from: Mapping[str, Any]) -> np.ndarray:
    """``computed_from`` as the entry's :data:`SOURCE_MEMBER` array (one JSON string)."""
    return np.array(json.dumps(computed_from, sort_keys=True))


def stored_source(arrays: Mapping[str, np.ndarray]) -> dict[str, Any] | None:
    """The record an entry carries; None when it has none (written before entries carried one)."""
    if SOURCE_MEMBER not in arrays:
        return None
    record = json.loads(str(arrays[SOURCE_MEMBER]))  # ValueError: damaged
    if not isinstance(record, dict):
        raise ValueError(f"its {SOURCE_MEMBER} record is not a mapping")
    return record


def entry_mismatch(key: str, arrays: Mapping[str, np.ndarray]) -> str | None:
    """Why the entry ``arrays`` is not the entry of ``key`` (its record is unreadable, or hashes
    to another key), or None when it is. An entry without a record is not judged here: it is
    from before entries carried one, and the cache treats it as a plain miss."""
    try:
        record = stored_source(arrays)
    except ValueError as exc:
        return f"its record of what it was computed from is damaged ({str(exc)[:80]})"
    if record is None or entry_key(record) == key:
        return None
    what = ", ".join(
        f"{name} {str(record[name])[:16]}" for name in ("kind", "model", "corpus") if name in record
    )
    return f"it was computed from something else ({what or 'another record'})"


def result_mismatch(result: ExtractionResult, record: Mapping[str, Any]) -> str | None:
    """Why the extraction ``result`` read from an entry is not what its record names (another
    model fingerprint, corpus hash, settings or code version; texts that do not hash to the
    corpus), or None."""
    own = result_source(result)
    for name, what in (
        ("model", "model fingerprint"),
        ("corpus", "corpus"),
        ("settings", "settings"),
        ("v", "extraction code version"),
        ("kind", "kind"),
    ):
        if own.get(name) != record.get(name):
            return f"its result has another {what} than its record"
    media = isinstance(result.extra, dict) and "inputs" in result.extra  # hashed pixels/samples
    if not media and result.texts:
        from isoscope.engine.inputs.corpus import Corpus

        if Corpus(result.texts, "cached").sha != result.corpus_sha:
            return "its texts do not hash to its corpus"
    return None


def result_arrays(result: ExtractionResult) -> dict[str, np.ndarray]:
    """``result`` as named arrays (no object arrays), its metadata as one JSON string."""
    meta = {
        "model": result.model,
        "model_fingerprint": result.model_fingerprint,
        "corpus_name": result.corpus_name,
        "corpus_sha": result.corpus_sha,
        "notices": list(result.notices),
        "settings": result.settings.to_dict(),
        "seconds": result.seconds,
        "extra": result.extra,
    }
    arrays = {name: np.asarray(getattr(result, name)) for name in _ARRAYS}
    arrays.update(
        {f"tok_{f}": np.asarray(getattr(result.tokens, f)) for f in TokenTable.__dataclass_fields__}
    )
    arrays["texts"] = np.array(result.texts, dtype=str)
    arrays["meta"] = np.array(json.dumps(meta))
    return arrays


def result_from_arrays(data: dict[str, np.ndarray]) -> ExtractionResult | None:
    """The result :func:`result_arrays` wrote, or None (from an older layout, or not an
    extraction)."""
    try:
        meta = json.loads(str(data["meta"]))
        arrays = {name: data[name] for name in _ARRAYS}
        tokens = TokenTable(*(data[f"tok_{f}"] for f in TokenTable.__dataclass_fields__))
        texts = tuple(str(t) for t in data["texts"])
        result = ExtractionResult(
            model=meta["model"],
            model_fingerprint=meta["model_fingerprint"],
            corpus_name=meta["corpus_name"],
            corpus_sha=meta["corpus_sha"],
            texts=texts,
            notices=tuple(meta["notices"]),
            settings=ExtractionSettings(**meta["settings"]),
            tokens=tokens,
            seconds=meta["seconds"],
            extra=meta.get("extra", {}),
            **arrays,
        )
    except Exception:
        return None  # from an older layout, or not an extraction: recompute
    return result
