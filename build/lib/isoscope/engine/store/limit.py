"""The result cache's size limit and its usage: sizes read (``500M``, ``5G``) and written
(``1.2 GiB``) in binary units, the limit of this process (:func:`set_process_limit`, else
``$ISOSCOPE_CACHE_LIMIT``, else 5 GiB), and the folder's bytes by kind (:class:`CacheUsage`). The
cache that keeps to the limit: :mod:`isoscope.engine.store.cache`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from isoscope.engine.errors import InputError

GIB = 1024**3
DEFAULT_CACHE_LIMIT = 5 * GIB
LIMIT_ENV = "ISOSCOPE_CACHE_LIMIT"
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_process_limit: int | None = None


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
    """The limit for every :class:`isoscope.engine.store.cache.ResultCache` of this process that is
    not given one (the sidebar's setting, or the CLI's ``--cache-limit``); ``None`` goes back to
    the env var / default."""
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
    # entries refused as not the entry of their key (isoscope.engine.store.cache.REFUSED_FILE)
    refused_count: int = 0

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
        if self.refused_count:
            parts.append(f"{self.refused_count} {self.refused_line()}")
        return f"{format_usage(self.total, self.limit)} ({', '.join(parts)})"

    def refused_line(self) -> str:
        """``entries refused ...`` after the count: what the cache did with them."""
        if self.refused_count == 1:
            return "entry refused as not the result of its key, and recomputed"
        return "entries refused as not the results of their keys, and recomputed"

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
            "refused_count": self.refused_count,
        }
