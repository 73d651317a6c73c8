"""What an extraction's cache entry is: its key (:func:`cache_key`: what determines the result)
and the result as named arrays, both ways (:func:`result_arrays`, :func:`result_from_arrays`),
read without pickle. The folder that keeps the entries: :mod:`isoscope.engine.store.cache`."""

from __future__ import annotations

import hashlib
import json

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


def cache_key(
    model_fingerprint: str, corpus_sha: str, settings: ExtractionSettings, kind: str = "extract"
) -> str:
    payload = json.dumps(
        {
            "kind": kind,
            "model": model_fingerprint,
            "corpus": corpus_sha,
            "settings": settings.to_dict(),
            "v": EXTRACT_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


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
