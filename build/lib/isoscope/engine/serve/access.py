"""Who may do what on a shared server: the shared-mode decision, the model sources a visitor may
load, per-session limits and the passphrase check.

A teacher's server is seen by every student on the network. In shared mode (``ISOSCOPE_SHARED=1``,
``isoscope serve --shared``, or any address that is not a loopback one) a visitor:

- chooses models only from the presets, ``random:`` / ``random-like:`` sources, Hub ids already
  in the server's Hugging Face cache, Hub ids matching the operator's patterns
  (``ISOSCOPE_HUB_ALLOW``, e.g. ``google/*,Qwen/Qwen3-*``: only these are downloaded, within
  the download quota ``ISOSCOPE_HUB_QUOTA_GB``, default 20 GB of Hugging Face cache), and
  folders under the operator's allow-list (``ISOSCOPE_MODEL_DIRS``, separated by
  ``os.pathsep``). Any other source is refused with one message that does not depend on whether
  the path or the Hub repo exists (:data:`SOURCE_REFUSED`, decided before any network call), so
  the dashboard cannot be used to probe the server's files or the Hub;
- opens saved analyses by upload only, never by a server path, and cannot opt in to pickle weights;
- sees the disk cache's use but not its controls (limit, clearing): those are the operator's,
  through the CLI and the environment;
- runs within per-session limits (:class:`SessionLimits`), each named in its message;
- is asked for the passphrase once per session when ``ISOSCOPE_PASSPHRASE`` (or Streamlit's
  secret ``passphrase``) is set, compared in constant time (:func:`passphrase_matches`).

Plain Python: the ui layer reads :class:`AccessPolicy` once per server process.
"""

from __future__ import annotations

import fnmatch
import hmac
import ipaddress
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from isoscope.engine.errors import InputError, ModelLoadError
from isoscope.engine.load.source import ModelSource, parse_source

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
SHARED_QUOTA_GB = 20.0  # Hugging Face cache a shared server may fill with visitors' downloads

SOURCE_REFUSED = (
    "On this shared server, models come from the list, random:FAMILY, random-like:SOURCE, a "
    "Hub id in the server's model cache or allowed by the operator (ISOSCOPE_HUB_ALLOW), or the "
    "operator's model folders (ISOSCOPE_MODEL_DIRS); a path typed here is not opened, nor "
    "another Hub id. Ask the operator to allow the model."
)


def is_loopback(address: str | None) -> bool:
    """Whether a server bound to ``address`` is reachable from this machine only. An empty
    address means "every interface" (Streamlit's default), so it is not loopback."""
    if not address or not address.strip():
        return False
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shared_mode(address: str | None, environ: Mapping[str, str] | None = None) -> bool:
    """``ISOSCOPE_SHARED`` when set (1/true/yes/on or 0/false/no/off), else whether the server
    listens beyond loopback."""
    value = (environ if environ is not None else os.environ).get("ISOSCOPE_SHARED", "")
    value = value.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    if value:
        raise InputError(
            f"ISOSCOPE_SHARED={value!r} is neither on (1, true, yes, on) nor off (0, false, no, off)"
        )
    return not is_loopback(address)


@dataclass(frozen=True)
class SessionLimits:
    """What one visitor's session may do on a shared server (each named in its message)."""

    max_upload_mb: float = 5.0  # a corpus or a saved analysis uploaded by a visitor
    max_texts: int = 2000  # texts in a visitor's corpus
    runs_per_minute: int = 6  # heavy runs (extraction, comparison, report, sweeps) started

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SessionLimits:
        env = environ if environ is not None else os.environ
        return cls(
            max_upload_mb=_number(env, "ISOSCOPE_MAX_UPLOAD_MB", cls.max_upload_mb, float),
            max_texts=_number(env, "ISOSCOPE_MAX_TEXTS", cls.max_texts, int),
            runs_per_minute=_number(env, "ISOSCOPE_RUNS_PER_MINUTE", cls.runs_per_minute, int),
        )

    def check_upload(self, name: str, size: int) -> None:
        if size > self.max_upload_mb * 1024 * 1024:
            raise InputError(
                f"{name} is {size / 1024**2:.1f} MB; uploads on this shared server are limited "
                f"to {self.max_upload_mb:g} MB per file (upload limit, ISOSCOPE_MAX_UPLOAD_MB)"
            )

    def check_texts(self, count: int) -> None:
        if count > self.max_texts:
            raise InputError(
                f"the corpus has {count:,} texts; this shared server analyses at most "
                f"{self.max_texts:,} per visitor (text limit, ISOSCOPE_MAX_TEXTS): use fewer texts"
            )


def _number(env: Mapping[str, str], name: str, default, kind):
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise InputError(f"{name}={raw!r} must be more than 0")
    return value


@dataclass(frozen=True)
class AccessPolicy:
    """The server's access rules; ``shared=False`` (a local server) allows everything."""

    shared: bool = False
    model_dirs: tuple[Path, ...] = ()
    passphrase: str = ""
    limits: SessionLimits = field(default_factory=SessionLimits)
    hub_allow: tuple[str, ...] = ()  # Hub id patterns a visitor may download (fnmatch)
    quota_gb: float = SHARED_QUOTA_GB

    @classmethod
    def from_env(
        cls,
        address: str | None,
        environ: Mapping[str, str] | None = None,
        secret_passphrase: str = "",
    ) -> AccessPolicy:
        env = environ if environ is not None else os.environ
        dirs = tuple(
            Path(p).expanduser().resolve()
            for p in env.get("ISOSCOPE_MODEL_DIRS", "").split(os.pathsep)
            if p.strip()
        )
        return cls(
            shared=shared_mode(address, env),
            model_dirs=dirs,
            passphrase=env.get("ISOSCOPE_PASSPHRASE", "") or secret_passphrase,
            limits=SessionLimits.from_env(env),
            hub_allow=tuple(
                p.strip() for p in env.get("ISOSCOPE_HUB_ALLOW", "").split(",") if p.strip()
            ),
            quota_gb=_number(env, "ISOSCOPE_HUB_QUOTA_GB", SHARED_QUOTA_GB, float),
        )

    def check_model_source(self, source: str) -> str:
        """``source`` if a visitor may load it, else :class:`InputError` (:data:`SOURCE_REFUSED`,
        the same text whatever exists on the server)."""
        source = (source or "").strip()
        if not self.shared:
            return source
        if self._allowed(source):
            return source
        raise InputError(SOURCE_REFUSED)

    def _allowed(self, source: str) -> bool:
        try:
            parsed = parse_source(source)
        except ModelLoadError:
            return False
        return self._allowed_parsed(parsed)

    def _allowed_parsed(self, parsed: ModelSource) -> bool:
        if parsed.kind in ("preset", "random"):
            return True
        if parsed.base is not None:
            return self._allowed_parsed(parsed.base)
        if parsed.kind == "hub":
            return self.hub_allowed(parsed.repo_id) or _cached_hub_id(parsed)
        return self._inside_model_dirs(parsed.text)

    def hub_allowed(self, repo_id: str) -> bool:
        """Whether ``repo_id`` matches one of the operator's ``ISOSCOPE_HUB_ALLOW`` patterns."""
        return any(fnmatch.fnmatchcase(repo_id.lower(), p.lower()) for p in self.hub_allow)

    @property
    def upload_limit_bytes(self) -> int:
        """The most bytes one uploaded file may hold: the limit of every user file, and on a
        shared server the per-visitor upload limit when that is lower. A saved analysis that
        arrives by upload may decompress to no more than this either."""
        from isoscope.engine.params import MAX_FILE_BYTES

        if not self.shared:
            return MAX_FILE_BYTES
        return min(MAX_FILE_BYTES, int(self.limits.max_upload_mb * 1024 * 1024))

    def check_upload(self, name: str, size: int) -> None:
        """The one check of every upload on every page: :class:`InputError` naming the size and
        the limit that refuses it (the shared server's own, or the file limit)."""
        from isoscope.engine.inputs.files import check_bytes_count

        if self.shared:
            self.limits.check_upload(name, size)
        check_bytes_count(size, name)

    @property
    def quota_bytes(self) -> int | None:
        """The cap on the Hugging Face cache for downloads (shared servers only)."""
        return int(self.quota_gb * 1e9) if self.shared else None

    def _inside_model_dirs(self, source: str) -> bool:
        path = Path(source).expanduser()
        if not path.is_absolute():  # relative to what? the server's folder is not the visitor's
            return False
        real = path.resolve()  # symlinks out of an allowed folder are not inside it
        return any(real == root or root in real.parents for root in self.model_dirs)

    @property
    def allow_pickle(self) -> bool:
        return not self.shared

    @property
    def server_paths(self) -> bool:
        """Whether a visitor may name files on the server (saved analyses, corpora by path)."""
        return not self.shared


def _cached_hub_id(source: ModelSource) -> bool:
    """A Hub id that the server's Hugging Face cache holds completely (a Hub id is never a path
    that exists relative to the server's folder: :func:`parse_source` reads that as a folder)."""
    from isoscope.engine.load.models import local_hub_snapshot

    return local_hub_snapshot(source.text) is not None


def passphrase_matches(given: str, expected: str) -> bool:
    """Constant-time comparison (no timing hint of how many characters matched)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


class RateLimit:
    """At most ``per_minute`` events per key in any 60-second window (thread-safe)."""

    def __init__(self, per_minute: int, clock=time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._events: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def check(self, key: str, what: str = "heavy runs") -> None:
        """Count one event for ``key``, or raise :class:`InputError` naming the limit."""
        now = self._clock()
        with self._lock:
            events = self._events.setdefault(key, deque())
            while events and now - events[0] >= 60.0:
                events.popleft()
            if len(events) >= self.per_minute:
                wait = 60.0 - (now - events[0])
                raise InputError(
                    f"this shared server allows {self.per_minute} {what} per minute per visitor "
                    f"(run limit, ISOSCOPE_RUNS_PER_MINUTE); try again in {wait:.0f} s"
                )
            events.append(now)
