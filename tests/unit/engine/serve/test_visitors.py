"""Who a visitor of a shared server is (their address; a proxy's header only when the operator
trusts the proxy), and the passphrase's growing lockout (per visitor, never sleeping)."""

from __future__ import annotations

import threading

import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.serve.visitors import LOCAL, PassphraseThrottle, trust_proxy, visitor_key

# ----------------------------------------------------------------------------- who a visitor is


@pytest.mark.parametrize(
    ("remote", "forwarded", "trusted", "expected"),
    [
        ("192.0.2.7", None, False, "192.0.2.7"),
        ("192.0.2.7", "203.0.113.9", False, "192.0.2.7"),  # a header any browser can send
        ("192.0.2.7", "203.0.113.9", True, "203.0.113.9"),
        ("192.0.2.7", "10.9.9.9, 203.0.113.9", True, "203.0.113.9"),  # the proxy's own entry
        ("192.0.2.7", "203.0.113.9, not-an-address", True, "192.0.2.7"),
        ("192.0.2.7", "", True, "192.0.2.7"),
        (None, None, False, LOCAL),  # Streamlit reports no address for a local browser
        ("127.0.0.1", None, False, LOCAL),
        ("::1", "203.0.113.9", False, LOCAL),
        ("2001:db8::5", None, False, "2001:db8::5"),
        ("garbage", None, False, LOCAL),
    ],
)
def test_the_visitor_is_the_address_not_a_header_they_send(remote, forwarded, trusted, expected):
    assert visitor_key(remote, forwarded, trusted) == expected


@pytest.mark.parametrize(
    ("value", "trusted"), [("1", True), ("yes", True), ("", False), ("0", False)]
)
def test_a_proxy_is_trusted_only_when_the_operator_says_so(value, trusted):
    assert trust_proxy({"ISOSCOPE_TRUST_PROXY": value}) is trusted


# ----------------------------------------------------------------------------- the passphrase


def test_wrong_guesses_lock_the_visitor_out_for_longer_and_longer():
    now = [0.0]
    gate = PassphraseThrottle(free=3, base_s=2.0, max_s=60.0, clock=lambda: now[0])
    delays = []
    for _ in range(10):
        gate.check("a")  # allowed: each guess comes once the last lockout has passed
        delays.append(gate.failed("a"))
        now[0] += delays[-1]
    assert delays == [0, 0, 0, 2, 4, 8, 16, 32, 60, 60]


def test_a_locked_out_visitor_is_refused_until_the_time_and_others_are_not():
    now = [0.0]
    gate = PassphraseThrottle(free=1, base_s=5.0, clock=lambda: now[0])
    gate.failed("a")
    assert gate.failed("a") == 5.0
    with pytest.raises(InputError, match="try again in 5 s"):
        gate.check("a")
    gate.check("b")  # another visitor guesses freely
    now[0] += 4.9
    with pytest.raises(InputError):
        gate.check("a")
    now[0] += 0.2
    gate.check("a")
    gate.succeeded("a")
    assert gate.failed("a") == 0.0  # a right passphrase starts the count again


def test_failures_are_forgotten_after_a_quiet_while():
    now = [0.0]
    gate = PassphraseThrottle(free=1, base_s=5.0, forget_s=100.0, clock=lambda: now[0])
    gate.failed("a")
    gate.failed("a")
    now[0] += 101.0
    assert gate.wait_s("a") == 0.0
    assert gate.failed("a") == 0.0


def test_the_lockout_does_not_block_other_threads():
    """No sleeping: a locked-out visitor's attempt returns at once in any thread."""
    gate = PassphraseThrottle(free=0, base_s=300.0)
    gate.failed("a")
    done = threading.Event()

    def attempt():
        try:
            gate.check("a")
        except InputError:
            done.set()

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(timeout=10)
    assert done.is_set()
