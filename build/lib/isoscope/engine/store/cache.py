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
  of every token, :mod:`isoscope.engine.extraction.spill`) are evicted with the result files, in
  one least-recently-used order (reading one touches it, :func:`touch`). One being written
  (``*.f32.part<pid>``) counts as a file being written.
- A file being written is a ``*.tmp`` file and is never evicted; only a temp file untouched for
  :data:`STALE_TEMP_SECONDS` (left by a killed process) is removed. Eviction runs under a
  ``filelock`` on ``.isoscope.lock`` in the folder, so two processes never evict at once.
- A result larger than the room the limit leaves is computed and returned but not kept, and an
  unwritable or full folder keeps nothing: in both cases :meth:`ResultCache.put` adds ONE notice to
  the result ("nothing was cached: ..."), which the CLI prints and the pages show.
- A corrupted or unreadable entry is treated as a miss: recomputed and replaced.
- An entry is served only when it is the entry of the key asked for: it carries the record its
  key hashes (model fingerprint, corpus hash, every setting, the code version;
  :mod:`isoscope.engine.store.entries`), the record must hash to the key, and an extraction's own
  fields and texts must agree with it. Anything else (a file copied over another key's, a record
  edited or cut short) is refused: removed, a miss, recomputed and replaced, logged, and counted in
  :data:`REFUSED_FILE` beside the results (``cache --info`` and the sidebar show the count). An
  entry from before entries carried a record is a plain miss.

Comparisons of two extractions (:func:`isoscope.analysis.compare.comparison.cached_compare`) are entries of the same
kind (:meth:`ResultCache.save_arrays`), under the same limit and eviction.

Beside this folder: the limit and the usage (:mod:`isoscope.engine.store.limit`), what an entry
holds and its key (:mod:`isoscope.engine.store.entries`), and the extraction through this cache
(:mod:`isoscope.engine.store.cached_extract`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from isoscope.engine.budget import page_budget, throughput
from isoscope.engine.environment import default_cache_dir
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.store.entries import (
    SOURCE_MEMBER,
    entry_key,
    entry_mismatch,
    result_arrays,
    result_from_arrays,
    result_mismatch,
    result_source,
    source_array,
    stored_source,
)
from isoscope.engine.store.limit import (
    LIMIT_ENV,
    CacheUsage,
    default_cache_limit,
    format_size,
    parse_size,
)

MODELS_DIR = "models"  # converted checkpoints (e.g. GGUF -> safetensors): counted, never evicted
SPILL_DIR = "spill"  # spilled states of every token: evicted with the results (module doc)
SPILL_SUFFIX = ".f32"
LOCK_NAME = ".isoscope.lock"
TEMP_SUFFIX = ".tmp"
STALE_TEMP_SECONDS = 24 * 3600  # a temp file untouched this long was left by a killed process
LOCK_TIMEOUT_S = 30.0
KEY_LOCKS_DIR = "locks"  # one lock file per key being computed (cross-process single flight)
KEY_LOCK_TIMEOUT_S = 900.0
REFUSED_FILE = "refused.json"  # how many entries were refused as not their key's, and the last why
REFUSED_LOCK_TIMEOUT_S = 2.0  # counting waits this long for the lock, then only logs

log = logging.getLogger(__name__)


def refused_entries(root: str | Path) -> tuple[int, str]:
    """``(entries refused so far, the last reason)`` recorded in the cache folder ``root``."""
    try:
        data = json.loads((Path(root) / REFUSED_FILE).read_text())
        return int(data.get("count", 0)), str(data.get("last", ""))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0, ""


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
        """The arrays stored under ``key`` (no pickle), or None (missing, unreadable, or not the
        entry of ``key``: refused, see the module doc). A hit counts as a use (LRU)."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except Exception:
            return None  # unreadable or evicted meanwhile: recompute
        why = entry_mismatch(key, arrays)
        if why is not None:
            self._refuse(key, why)
            return None
        try:
            os.utime(path)  # last use = mtime (atime is unreliable: noatime/relatime mounts)
        except OSError:
            pass  # read-only folder: LRU then degrades to least recently written
        return arrays

    def load(self, key: str) -> ExtractionResult | None:
        """The cached result, or None (missing, unreadable, older layout, or refused as not the
        result its key names). A hit counts as a use."""
        data = self.load_arrays(key)
        if data is None:
            return None
        record = stored_source(data)
        result = result_from_arrays(data)
        if record is None or result is None:
            return None  # from before entries carried a record, or another layout: recompute
        why = result_mismatch(result, record)
        if why is not None:
            self._refuse(key, why)
            return None
        return result

    def _refuse(self, key: str, why: str) -> None:
        """Log, count and remove an entry that is not the entry of ``key`` (the caller then
        recomputes it and writes the right one; until then a read is a plain miss)."""
        line = f"cache entry {key[:12]} refused and recomputed: {why}"
        log.warning("isoscope: %s", line)
        _unlink(self.path(key))
        from filelock import FileLock, Timeout

        try:
            with FileLock(str(self.root / LOCK_NAME), timeout=REFUSED_LOCK_TIMEOUT_S):
                count, _last = refused_entries(self.root)
                throughput.write_records(
                    self.root / REFUSED_FILE, {"count": count + 1, "last": line}
                )
        except (OSError, Timeout):
            pass  # a read-only folder or a busy lock: the log line stays

    # ------------------------------------------------------------------ write

    def save(self, key: str, result: ExtractionResult) -> Path | None:
        """Write ``result`` and evict down to the limit; returns the path, or None when nothing was
        kept, with the reason in :attr:`notice` (folder not writable or full, result too large).
        ``key`` must be the key of what the result says it was computed from."""
        return self.save_arrays(key, result_arrays(result), computed_from=result_source(result))

    def save_arrays(
        self, key: str, arrays: dict[str, np.ndarray], *, computed_from: dict
    ) -> Path | None:
        """:meth:`save` for any named arrays (no object arrays: they are read without pickle),
        with ``computed_from``, the record ``key`` is the hash of
        (:func:`isoscope.engine.store.entries.entry_key`), kept in the entry for its readers."""
        if entry_key(computed_from) != key:
            raise ValueError(f"cache key {key} is not the key of the record given with it")
        arrays = {**arrays, SOURCE_MEMBER: source_array(computed_from)}
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
                np.savez(fh, **cast(dict[str, Any], arrays))  # else mypy matches allow_pickle
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
            refused_count=refused_entries(self.root)[0],
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
        by the runs, :mod:`isoscope.engine.budget.throughput`, and the first looks chosen,
        :mod:`isoscope.engine.budget.page_budget`; with
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
                # the speeds measured, the first looks chosen and the count of refused entries
                # go with the results
                for name in (throughput.FILE_NAME, page_budget.FIRST_LOOKS_FILE, REFUSED_FILE):
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
