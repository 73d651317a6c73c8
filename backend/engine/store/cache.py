"""On-disk cache of extraction results, so a restart does not recompute; bounded by a size limit.

Location: ``$ISOSCOPE_CACHE_DIR`` if set, else the user's cache directory (platformdirs), e.g.
``~/.cache/isoscope``. Keys hash the model fingerprint, the corpus hash, the settings and the
extraction code version. Each entry is one ``<key>.npz`` (arrays) plus its JSON metadata inside it;
writes go to a temporary file that is renamed, so a crash never leaves half an entry, and two
processes writing the same key each rename a whole file (the last one wins, both are valid).

Size limit (default 5 GiB; ``ResultCache(limit=)``, the CLI's ``--cache-limit``, the sidebar, or
``$ISOSCOPE_CACHE_LIMIT`` such as ``500M`` or ``5G``):

- The limit counts everything in the folder: result files, converted model folders under
  ``models/`` and anything else. Only result files (``<key>.npz`` at the top level) are evicted,
  least recently used first (a load touches the file's mtime, so mtime is the last use). Model
  folders are never evicted automatically (a running process may be reading one); they are
  removed only by an explicit ``clear(include_models=True)`` (``cache --clear --models``).
- Spilled states (``spill/*.f32``: every token of one hidden state, written for the projection
  of every token, :mod:`backend.engine.extraction.spill`) are evicted with the result files, in
  one least-recently-used order (reading one touches it, :func:`touch`). One being written
  (``*.f32.part<pid>``) counts as a file being written.
- A file being written is a ``*.tmp`` file and is never evicted; only a temp file untouched for
  :data:`STALE_TEMP_SECONDS` (left by a killed process) is removed. Eviction runs under a
  ``filelock`` on ``.isoscope.lock`` in the folder, so two processes never evict at once.
- A result larger than the room the limit leaves is computed and returned but not kept, and an
  unwritable or full folder keeps nothing: in both cases :meth:`ResultCache.put` adds ONE notice to
  the result ("nothing was cached: ..."), which the CLI prints and the pages show.
- A corrupted or unreadable entry is treated as a miss: recomputed and replaced.

Comparisons of two extractions (:func:`backend.analysis.compare.comparison.cached_compare`) are entries of the same
kind (:meth:`ResultCache.save_arrays`), under the same limit and eviction.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from backend.engine.budget import page_budget, throughput
from backend.engine.budget.batching import Batching, padded_tokens
from backend.engine.environment import default_cache_dir
from backend.engine.errors import InputError
from backend.engine.extraction import (
    EXTRACT_VERSION,
    ExtractionResult,
    ExtractionSettings,
    TokenTable,
)
from backend.engine.store.provenance import attribute

GIB = 1024**3
DEFAULT_CACHE_LIMIT = 5 * GIB
LIMIT_ENV = "ISOSCOPE_CACHE_LIMIT"
MODELS_DIR = "models"  # converted checkpoints (e.g. GGUF -> safetensors): counted, never evicted
SPILL_DIR = "spill"  # spilled states of every token: evicted with the results (module doc)
SPILL_SUFFIX = ".f32"
LOCK_NAME = ".isoscope.lock"
TEMP_SUFFIX = ".tmp"
STALE_TEMP_SECONDS = 24 * 3600  # a temp file untouched this long was left by a killed process
LOCK_TIMEOUT_S = 30.0
KEY_LOCKS_DIR = "locks"  # one lock file per key being computed (cross-process single flight)
KEY_LOCK_TIMEOUT_S = 900.0
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_process_limit: int | None = None

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


def parse_size(text: str | int, what: str = "cache limit") -> int:
    """Bytes from ``"500M"``, ``"5G"``, ``"1.5GiB"``, ``"800MB"`` or a plain byte count.

    Units are binary (K = 1024, M = 1024², G = 1024³, T = 1024⁴), with or without ``B``/``iB``."""
    if isinstance(text, int | np.integer):
        value = int(text)
        if value < 0:
            raise InputError(f"{what} must be 0 or more bytes, got {value}")
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?\s*", str(text), re.I)
    if not match:
        raise InputError(
            f"{what} {str(text)!r} is not a size; give bytes or a number with a unit, such as 500M or 5G"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_size(num_bytes: float) -> str:
    """``1.2 GiB``, ``5 GiB``, ``83 MiB``, ``12 B`` (binary units, as the limit takes them)."""
    for unit, factor in (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if num_bytes >= factor:
            return f"{_short(num_bytes / factor)} {unit}"
    return f"{int(num_bytes)} B"


def format_usage(used: int, limit: int) -> str:
    """``"1.2 of 5 GiB"``: both numbers in the limit's unit (a small use in its own: ``40 MiB of 5 GiB``)."""
    for unit, factor in (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if limit >= factor:
            if 0 < used < factor / 20:  # "40 MiB of 5 GiB", not "0 of 5 GiB"
                return f"{format_size(used)} of {_short(limit / factor)} {unit}"
            return f"{_short(used / factor)} of {_short(limit / factor)} {unit}"
    return f"{used:,} of {limit:,} B"


def _short(value: float) -> str:
    """``5``, ``1.2``, ``83``: one decimal below 10 unless it is 0, none from 10."""
    text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return text.removesuffix(".0")


def set_process_limit(limit: int | str | None) -> None:
    """The limit for every :class:`ResultCache` of this process that is not given one (the sidebar's
    setting, or the CLI's ``--cache-limit``); ``None`` goes back to the env var / default."""
    global _process_limit
    _process_limit = None if limit is None else parse_size(limit)


def default_cache_limit() -> int:
    """This process's limit: :func:`set_process_limit`, else ``$ISOSCOPE_CACHE_LIMIT``, else 5 GiB."""
    if _process_limit is not None:
        return _process_limit
    env = os.environ.get(LIMIT_ENV, "").strip()
    if env:
        return parse_size(env, f"${LIMIT_ENV}")
    return DEFAULT_CACHE_LIMIT


@dataclass(frozen=True)
class CacheUsage:
    """Bytes in the cache folder by kind (apparent file sizes)."""

    root: str
    limit: int
    results_bytes: int = 0
    results_count: int = 0
    models_bytes: int = 0
    temp_bytes: int = 0
    other_bytes: int = 0
    spill_bytes: int = 0
    spill_count: int = 0

    @property
    def total(self) -> int:
        return (
            self.results_bytes
            + self.models_bytes
            + self.temp_bytes
            + self.other_bytes
            + self.spill_bytes
        )

    def summary(self) -> str:
        """``1.2 of 5 GiB (results 1.0 GiB in 12 files, converted models 210 MiB)``."""
        files = "file" if self.results_count == 1 else "files"
        parts = [f"results {format_size(self.results_bytes)} in {self.results_count} {files}"]
        if self.spill_count:
            states = "state" if self.spill_count == 1 else "states"
            parts.append(f"{self.spill_count} spilled {states} {format_size(self.spill_bytes)}")
        if self.models_bytes:
            parts.append(f"converted models {format_size(self.models_bytes)}")
        if self.temp_bytes:
            parts.append(f"being written {format_size(self.temp_bytes)}")
        if self.other_bytes:
            parts.append(f"other {format_size(self.other_bytes)}")
        return f"{format_usage(self.total, self.limit)} ({', '.join(parts)})"

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "limit_bytes": self.limit,
            "total_bytes": self.total,
            "results_bytes": self.results_bytes,
            "results_count": self.results_count,
            "models_bytes": self.models_bytes,
            "temp_bytes": self.temp_bytes,
            "other_bytes": self.other_bytes,
            "spill_bytes": self.spill_bytes,
            "spill_count": self.spill_count,
        }


def touch(path: str | Path) -> None:
    """Mark a cached file as just used (eviction is least recently used by mtime)."""
    try:
        os.utime(path)
    except OSError:
        pass  # evicted meanwhile, or not ours to touch: the next use recomputes


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass  # removed while we walked
    return total


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
    """Disk cache of :class:`ExtractionResult` objects, bounded by ``limit`` bytes (LRU eviction).

    ``root=None`` uses :func:`default_cache_dir`; ``limit=None`` uses :func:`default_cache_limit`
    (read when used, so a sidebar change applies at once). See the module doc for the rules."""

    def __init__(self, root: str | Path | None = None, limit: int | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self._limit = None if limit is None else parse_size(limit)
        if limit is None:
            default_cache_limit()  # a malformed $ISOSCOPE_CACHE_LIMIT fails here, before any work
        self.notice: str | None = None  # why the last save kept nothing, else None

    @property
    def limit(self) -> int:
        return self._limit if self._limit is not None else default_cache_limit()

    def path(self, key: str) -> Path:
        return self.root / f"{key}.npz"

    # ------------------------------------------------------------------ read

    def load_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key`` (no pickle), or None (missing or unreadable). A hit
        counts as a use (LRU)."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except Exception:
            return None  # unreadable or evicted meanwhile: recompute
        try:
            os.utime(path)  # last use = mtime (atime is unreliable: noatime/relatime mounts)
        except OSError:
            pass  # read-only folder: LRU then degrades to least recently written
        return arrays

    def load(self, key: str) -> ExtractionResult | None:
        """The cached result, or None (missing, unreadable, older layout). A hit counts as a use."""
        data = self.load_arrays(key)
        if data is None:
            return None
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

    # ------------------------------------------------------------------ write

    def save(self, key: str, result: ExtractionResult) -> Path | None:
        """Write ``result`` and evict down to the limit; returns the path, or None when nothing was
        kept, with the reason in :attr:`notice` (folder not writable or full, result too large)."""
        return self.save_arrays(key, _result_arrays(result))

    def save_arrays(self, key: str, arrays: dict[str, np.ndarray]) -> Path | None:
        """:meth:`save` for any named arrays (no object arrays: they are read without pickle)."""
        self.notice = None
        limit = self.limit
        estimate = sum(a.nbytes for a in arrays.values())
        usage = self.usage()
        pinned = usage.models_bytes + usage.other_bytes  # counted, never evicted
        if estimate > limit - pinned:
            self.notice = self._too_large(estimate, limit, models=pinned)
            return None
        tmp: str | None = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{key}.", suffix=TEMP_SUFFIX)
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **arrays)
            final = self.path(key)
            final_size = os.path.getsize(tmp)
            os.replace(tmp, final)
            tmp = None
        except OSError as exc:
            self.notice = self._not_writable(exc)
            return None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self.enforce_limit(keep=final)
        if not final.exists():  # the result alone does not fit next to what cannot be evicted
            usage = self.usage()
            self.notice = self._too_large(
                final_size, limit, models=usage.models_bytes + usage.other_bytes
            )
            return None
        return final

    def put(self, key: str, result: ExtractionResult) -> ExtractionResult:
        """:meth:`save`, then ``result`` itself, or with ONE notice added when nothing was kept."""
        if self.save(key, result) is None and self.notice:
            return replace(result, notices=(*result.notices, self.notice))
        return result

    def _not_writable(self, exc: OSError) -> str:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            why = "the disk holding it is full"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            why = "it is not writable"
        else:
            why = f"it cannot be written ({exc.strerror or exc})"
        return (
            f"nothing was cached: the cache folder {str(self.root)!r}: {why}; the analysis ran "
            "normally but will be recomputed next time (free space, or set ISOSCOPE_CACHE_DIR "
            "to a writable folder)"
        )

    def _too_large(self, size: int, limit: int, models: int = 0) -> str:
        room = (
            f", {format_size(models)} of which is taken by converted models that are never evicted"
            if models
            else ""
        )
        return (
            f"nothing was cached: this result ({format_size(size)}) does not fit in the cache "
            f"limit of {format_size(limit)}{room}; raise the limit (sidebar, --cache-limit or "
            f"${LIMIT_ENV}) or lower the token sample to keep it"
        )

    # ------------------------------------------------------------------ size, eviction, clear

    def _entries(
        self,
    ) -> tuple[list[tuple[float, int, Path]], list[tuple[float, int, Path]], CacheUsage]:
        """(evictable files: results and spilled states, temp files) as (mtime, size, path), and
        the usage."""
        results: list[tuple[float, int, Path]] = []
        temps: list[tuple[float, int, Path]] = []
        spills, spill_temps, spill_other = self._spills()
        models, other = 0, spill_other
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            entries = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name == SPILL_DIR:
                        continue  # scanned by _spills
                    size = _tree_size(Path(entry.path))
                    if entry.name == MODELS_DIR:
                        models += size
                    else:
                        other += size
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # removed while we looked
            if entry.name == LOCK_NAME:
                continue
            if entry.name.endswith(TEMP_SUFFIX):
                temps.append((st.st_mtime, st.st_size, Path(entry.path)))
            elif entry.name.endswith(".npz"):
                results.append((st.st_mtime, st.st_size, Path(entry.path)))
            else:
                other += st.st_size
        usage = CacheUsage(
            root=str(self.root),
            limit=self.limit,
            results_bytes=sum(s for _, s, _ in results),
            results_count=len(results),
            models_bytes=models,
            temp_bytes=sum(s for _, s, _ in temps + spill_temps),
            other_bytes=other,
            spill_bytes=sum(s for _, s, _ in spills),
            spill_count=len(spills),
        )
        return results + spills, temps + spill_temps, usage

    def _spills(
        self,
    ) -> tuple[list[tuple[float, int, Path]], list[tuple[float, int, Path]], int]:
        """(spilled states, spills being written) as (mtime, size, path), and other bytes there."""
        spills: list[tuple[float, int, Path]] = []
        writing: list[tuple[float, int, Path]] = []
        other = 0
        try:
            entries = list(os.scandir(self.root / SPILL_DIR))
        except OSError:
            entries = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    other += _tree_size(Path(entry.path))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            row = (st.st_mtime, st.st_size, Path(entry.path))
            if entry.name.endswith(SPILL_SUFFIX):
                spills.append(row)
            elif f"{SPILL_SUFFIX}.part" in entry.name:
                writing.append(row)
            else:
                other += st.st_size
        return spills, writing, other

    def spill_path(self, name: str) -> Path:
        """Where a spilled state named ``name`` (no suffix) lives: evicted with the results."""
        return self.root / SPILL_DIR / f"{name}{SPILL_SUFFIX}"

    def usage(self) -> CacheUsage:
        return self._entries()[2]

    def _lock(self):
        from filelock import FileLock

        return FileLock(str(self.root / LOCK_NAME), timeout=LOCK_TIMEOUT_S)

    def key_lock(self, key: str):
        """A cross-process lock for computing ``key`` (a context manager). Waits up to
        :data:`KEY_LOCK_TIMEOUT_S` for another process, then computes anyway; without a writable
        cache folder it does not lock."""
        from filelock import FileLock, Timeout

        folder = self.root / KEY_LOCKS_DIR
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(folder / f"{key}.lock"), timeout=KEY_LOCK_TIMEOUT_S)
            lock.acquire()
        except (OSError, Timeout):
            return contextlib.nullcontext()
        return _Release(lock)

    def enforce_limit(self, keep: Path | None = None) -> list[Path]:
        """Evict least recently used result files and spilled states until finished files fit the
        limit; returns them.

        Files being written (``*.tmp``) are not counted and never evicted, except stale ones. ``keep``
        (the file just written) goes last, only if it alone does not fit. No-op without a lock."""
        from filelock import Timeout

        removed: list[Path] = []
        try:
            with self._lock():
                results, temps, usage = self._entries()
                now = time.time()
                for mtime, _size, path in temps:
                    if now - mtime > STALE_TEMP_SECONDS and _unlink(path):
                        removed.append(path)
                total = usage.total - usage.temp_bytes
                limit = self.limit
                order = sorted(results, key=lambda r: (r[2] == keep, r[0]))
                for _mtime, size, path in order:
                    if total <= limit:
                        break
                    if _unlink(path):
                        removed.append(path)
                    total -= size
        except (OSError, Timeout):
            pass  # folder not writable or another process holds the lock: the next save evicts
        return removed

    def clear(self, include_models: bool = False) -> tuple[int, int]:
        """Remove every result file and spilled state (and stale temp files, the speeds measured
        by the runs, :mod:`backend.engine.budget.throughput`, and the first looks chosen,
        :mod:`backend.engine.budget.page_budget`; with
        ``include_models`` the converted model folders too). Files being written are left alone.
        Returns (files removed, bytes freed)."""
        from filelock import Timeout

        count = freed = 0
        try:
            with self._lock():
                results, temps, usage = self._entries()
                now = time.time()
                stale = [t for t in temps if now - t[0] > STALE_TEMP_SECONDS]
                for _mtime, size, path in results + stale:
                    if _unlink(path):
                        count += 1
                        freed += size
                # the speeds measured and the first looks chosen with the results go with them
                for name in (throughput.FILE_NAME, page_budget.FIRST_LOOKS_FILE):
                    if (self.root / name).exists():
                        freed += (self.root / name).stat().st_size
                        (self.root / name).unlink(missing_ok=True)
                models = self.root / MODELS_DIR
                if include_models and models.is_dir():
                    shutil.rmtree(models, ignore_errors=True)
                    count += 1
                    freed += usage.models_bytes - (_tree_size(models) if models.exists() else 0)
        except Timeout as exc:
            raise InputError(
                f"another isoscope process holds the cache lock in {str(self.root)!r}; try again"
            ) from exc
        except OSError as exc:
            if self.root.exists():
                raise InputError(
                    f"cannot clear the cache folder {str(self.root)!r} ({exc.strerror or exc})"
                ) from exc
        return count, freed


class _Release:
    def __init__(self, lock) -> None:
        self.lock = lock

    def __enter__(self):
        return self.lock

    def __exit__(self, *exc) -> None:
        self.lock.release()


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
    except OSError:
        return False


def _result_arrays(result: ExtractionResult) -> dict[str, np.ndarray]:
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


def cached_extract(
    loaded, corpus, settings=None, progress=None, cache: ResultCache | None = None
) -> ExtractionResult:
    """:func:`backend.engine.extraction.extract` through the disk cache (``cache=None`` uses the default).

    When nothing could be kept (see :meth:`ResultCache.put`) the result carries one notice saying so.
    A hit computed from another path with identical weights names ``loaded`` in its model card
    (:func:`backend.engine.store.provenance.attribute`), with one line saying where the statistics came from."""
    from backend.engine.extraction import extract

    settings = settings or ExtractionSettings()
    cache = cache if cache is not None else ResultCache()
    key = cache_key(loaded.fingerprint, corpus.sha, settings)
    hit = cache.load(key)
    if hit is None:
        # Another process (a second server, the prewarm, the CLI) computing this key: wait for it
        # and read its result instead of computing it again.
        with cache.key_lock(key):
            hit = cache.load(key)
            if hit is None:
                result = extract(loaded, corpus, settings, progress)
                _record_throughput(cache, loaded, corpus, result)
                return cache.put(key, result)
    if progress is not None:
        progress(len(corpus), len(corpus))
    return attribute(hit, loaded.info.to_dict())


def _record_throughput(cache: ResultCache, loaded, corpus, result: ExtractionResult) -> None:
    """This run's measured speed per padded token, kept beside the results for the next estimate
    (text only: an image or clip's token count is the model's, not the corpus's), and the
    phases its load measured (:func:`backend.engine.budget.throughput.record_phases`)."""
    throughput.record_phases(cache.root, loaded)
    if getattr(corpus, "kind", "text") != "text" or not result.seconds:
        return
    counts = throughput.token_counts(loaded.tokenizer, corpus.texts, result.settings.max_length)
    throughput.record_extraction(
        cache.root,
        throughput.device_key(loaded.device),
        throughput.parameter_count(loaded.model),
        padded_tokens(counts, Batching.of(result.settings)),
        result.seconds,
    )
