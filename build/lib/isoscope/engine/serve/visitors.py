"""Who a visitor is, for a shared server's per-visitor rules, and the passphrase's growing delay.

A visitor is the address their browser connects from, not a browser tab: a tab is a new Streamlit
session, so a limit kept per session starts again in every tab a visitor opens. The address is
the connection's own peer address. Behind a reverse proxy (nginx, Caddy) that address is the
proxy's, the same for every visitor; the operator then sets ``ISOSCOPE_TRUST_PROXY=1`` and the
visitor is the address the proxy appended last to ``X-Forwarded-For``. Without that opt-in the
header is ignored: any browser can send one, with any address in it.

Visitors sharing one address (a classroom behind one NAT) share its limits; the limits' defaults
are sized per student, so an operator with such a network raises them (``ISOSCOPE_RUNS_PER_MINUTE``).

Plain Python: the ui layer passes in the connection's address and headers.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
from dataclasses import dataclass

from isoscope.engine.errors import InputError

TRUE = ("1", "true", "yes", "on")
LOCAL = "local"  # the visitor key of a browser on the server's own machine


def trust_proxy(environ: dict[str, str] | None = None) -> bool:
    """``ISOSCOPE_TRUST_PROXY``: whether the server sits behind a reverse proxy whose
    ``X-Forwarded-For`` names the visitor (off unless the operator sets it)."""
    value = (environ if environ is not None else os.environ).get("ISOSCOPE_TRUST_PROXY", "")
    return value.strip().lower() in TRUE


def visitor_key(remote_ip: str | None, forwarded_for: str | None, trusted_proxy: bool) -> str:
    """The key a visitor's limits are counted under: the peer address of the connection, or,
    behind a proxy the operator trusts, the last address of ``X-Forwarded-For`` (the one that proxy
    added; the addresses before it are whatever the browser sent). A malformed address counts as
    the connection's own. ``remote_ip`` None: a browser on the server's machine."""
    if trusted_proxy and forwarded_for:
        last = forwarded_for.split(",")[-1].strip()
        if _is_address(last):
            return last
    if remote_ip and _is_address(remote_ip) and not ipaddress.ip_address(remote_ip).is_loopback:
        return remote_ip
    return LOCAL


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


@dataclass
class _Failures:
    count: int = 0
    last: float = 0.0
    locked_until: float = 0.0


class PassphraseThrottle:
    """Wrong passphrases per visitor, and the time before that visitor may try again.

    The first ``free`` wrong guesses cost nothing (a typo); each one after that locks the visitor
    out for ``base_s`` seconds, doubling with every further failure up to ``max_s``. A locked-out
    visitor's attempts are refused without being compared, so no guess is tested faster than the
    delay allows. A right passphrase, or ``forget_s`` seconds without a failure, starts the count
    again. Nothing sleeps: the gate refuses attempts until the time has passed, so other sessions
    of the server are never held up (thread-safe)."""

    def __init__(
        self,
        free: int = 3,
        base_s: float = 2.0,
        max_s: float = 300.0,
        forget_s: float = 900.0,
        clock=time.monotonic,
    ) -> None:
        self.free, self.base_s, self.max_s, self.forget_s = free, base_s, max_s, forget_s
        self._clock = clock
        self._failures: dict[str, _Failures] = {}
        self._lock = threading.Lock()

    def wait_s(self, visitor: str) -> float:
        """Seconds before ``visitor`` may try again (0: now)."""
        with self._lock:
            entry = self._current(visitor)
            return max(0.0, entry.locked_until - self._clock()) if entry else 0.0

    def check(self, visitor: str) -> None:
        """:class:`InputError` naming the wait while ``visitor`` is locked out."""
        wait = self.wait_s(visitor)
        if wait > 0:
            raise InputError(
                f"Too many wrong passphrases from your address: try again in {wait:.0f} s "
                "(each further wrong guess doubles the wait)."
            )

    def failed(self, visitor: str) -> float:
        """Count one wrong passphrase; returns the lockout it starts in seconds (0: none yet)."""
        with self._lock:
            now = self._clock()
            entry = self._current(visitor) or self._failures.setdefault(visitor, _Failures())
            entry.count += 1
            entry.last = now
            over = entry.count - self.free
            delay = min(self.base_s * 2 ** (over - 1), self.max_s) if over > 0 else 0.0
            entry.locked_until = now + delay
            return delay

    def succeeded(self, visitor: str) -> None:
        with self._lock:
            self._failures.pop(visitor, None)

    def _current(self, visitor: str) -> _Failures | None:
        entry = self._failures.get(visitor)
        if entry is not None and self._clock() - entry.last > self.forget_s:
            del self._failures[visitor]
            return None
        return entry
