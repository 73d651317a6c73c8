"""The server's access rules in the UI (see :mod:`isoscope.engine.serve.access`): read once per server
process, the passphrase gate, and the per-visitor run limit.

On a local server (the default: localhost) nothing here changes anything. In shared mode the
sidebar offers no pickle opt-in, a typed model path outside ``ISOSCOPE_MODEL_DIRS`` is refused
with one text, saved analyses open by upload only, the disk-cache controls are the operator's,
uploads, corpora and heavy runs have per-visitor limits, and an optional passphrase is asked once
per session.
"""

from __future__ import annotations

import threading

import streamlit as st

from isoscope.engine.serve.access import AccessPolicy, RateLimit, passphrase_matches

PASSED_KEY = "isoscope_passphrase_ok"

_lock = threading.Lock()
_policy: AccessPolicy | None = None
_runs: RateLimit | None = None


def _secret_passphrase() -> str:
    try:
        return str(st.secrets.get("passphrase", "") or "")
    except Exception:  # no secrets.toml: Streamlit raises when secrets are read
        return ""


def policy() -> AccessPolicy:
    """This server's rules, decided once per process from the environment and its address."""
    global _policy, _runs
    with _lock:
        if _policy is None:
            address = st.get_option("server.address")
            _policy = AccessPolicy.from_env(address, secret_passphrase=_secret_passphrase())
            _runs = RateLimit(_policy.limits.runs_per_minute)
        return _policy


def reset_policy() -> None:
    """Forget the rules (tests change the environment between apps in one process)."""
    global _policy, _runs
    with _lock:
        _policy = _runs = None


def shared() -> bool:
    return policy().shared


def check_run_allowed(session_id: str) -> None:
    """Count one heavy run this visitor starts; :class:`InputError` past the limit (shared only)."""
    if policy().shared and _runs is not None:
        _runs.check(session_id)


def passphrase_gate() -> None:
    """Ask for the passphrase once per session when the operator set one; stop the page until it
    is right. The comparison takes the same time however much of it matched."""
    expected = policy().passphrase
    if not expected or st.session_state.get(PASSED_KEY):
        return
    st.title("isoscope")
    st.caption("This server asks for a passphrase. Your teacher or the operator has it.")
    with st.form("isoscope_passphrase"):
        given = st.text_input("Passphrase", type="password", key="isoscope_passphrase_input")
        submitted = st.form_submit_button("Enter")
    if submitted:
        if passphrase_matches(given, expected):
            st.session_state[PASSED_KEY] = True
            st.rerun()
        st.error("That passphrase is not right; try again.")
    st.stop()
