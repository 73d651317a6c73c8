"""On-disk cache of extraction results, so a restart does not recompute.

Location: ``$ISOSCOPE_CACHE_DIR`` if set, else the user's cache directory (platformdirs), e.g.
``~/.cache/isoscope``. Keys hash the model fingerprint, the corpus hash, the settings and the
extraction code version. Each entry is one ``.npz`` (arrays) plus its JSON metadata inside it;
writes go to a temporary file that is renamed, so a crash never leaves half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from backend.extract import EXTRACT_VERSION, ExtractionResult, ExtractionSettings, TokenTable

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


def default_cache_dir() -> Path:
    env = os.environ.get("ISOSCOPE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("isoscope"))


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


class ResultCache:
    """Disk cache of :class:`ExtractionResult` objects; ``root=None`` uses :func:`default_cache_dir`."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()

    def path(self, key: str) -> Path:
        return self.root / f"{key}.npz"

    def load(self, key: str) -> ExtractionResult | None:
        path = self.path(key)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                arrays = {name: data[name] for name in _ARRAYS}
                tokens = TokenTable(*(data[f"tok_{f}"] for f in TokenTable.__dataclass_fields__))
                texts = tuple(str(t) for t in data["texts"])
        except Exception:
            return None  # unreadable or from an older layout: recompute
        return ExtractionResult(
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

    def save(self, key: str, result: ExtractionResult) -> Path | None:
        """Write ``result``; returns the path, or None when the cache folder is not writable."""
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
        arrays = {name: getattr(result, name) for name in _ARRAYS}
        arrays.update(
            {f"tok_{f}": getattr(result.tokens, f) for f in TokenTable.__dataclass_fields__}
        )
        arrays["texts"] = np.array(result.texts, dtype=str)
        arrays["meta"] = np.array(json.dumps(meta))
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **arrays)
            final = self.path(key)
            os.replace(tmp, final)
            return final
        except OSError:
            return None


def cached_extract(
    loaded, corpus, settings=None, progress=None, cache: ResultCache | None = None
) -> ExtractionResult:
    """:func:`backend.extract.extract` through the disk cache (``cache=None`` uses the default)."""
    from backend.extract import extract

    settings = settings or ExtractionSettings()
    cache = cache if cache is not None else ResultCache()
    key = cache_key(loaded.fingerprint, corpus.sha, settings)
    hit = cache.load(key)
    if hit is not None:
        if progress is not None:
            progress(len(corpus), len(corpus))
        return hit
    result = extract(loaded, corpus, settings, progress)
    cache.save(key, result)
    return result
