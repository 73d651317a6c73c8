"""A shared server's per-visitor rules hold against a visitor who opens more tabs, guesses the
passphrase, or forges a proxy header: the run limit counts the visitor (their address), not the
tab; wrong passphrases lock that visitor out for longer and longer without holding up anyone
else; ``X-Forwarded-For`` names the visitor only when the operator says a proxy sets it."""

from __future__ import annotations

import threading

import pytest

from backend.engine.errors import InputError
from backend.engine.extraction import ExtractionSettings
from backend.engine.serve.visitors import LOCAL, PassphraseThrottle, trust_proxy, visitor_key
from tests.app.conftest import shown
from tests.hostile.conftest import shared_app
from ui.server import access

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


def _guess(at, passphrase: str) -> list[str]:
    at.text_input(key="isoscope_passphrase_input").set_value(passphrase)
    at.button[0].click().run()
    assert not at.exception
    return [shown(e.value) for e in at.error]


def test_the_gate_delays_a_guesser_in_every_tab(shared_env):
    shared_env.setenv("ISOSCOPE_PASSPHRASE", "open sesame")
    access.reset_policy()
    at = shared_app()
    at.run()
    now = [1000.0]
    access._guesses._clock = lambda: now[0]  # the server's throttle, on a clock the test moves
    for guess in ("a", "b", "c"):  # the first wrong guesses are free (typos)
        assert _guess(at, guess) == ["That passphrase is not right; try again."]
    assert _guess(at, "d") == ["That passphrase is not right; try again in 2 s."]
    # the right passphrase during the lockout is refused without being compared
    (refused,) = _guess(at, "open sesame")
    assert "Too many wrong passphrases" in refused
    assert [t.value for t in at.title] == ["isoscope"]
    second_tab = shared_app()  # a new tab is the same visitor
    second_tab.run()
    (refused,) = _guess(second_tab, "open sesame")
    assert "Too many wrong passphrases" in refused
    now[0] += 2.5
    assert _guess(at, "open sesame") == []
    assert "isoscope" not in [t.value for t in at.title]  # the app, not the gate


# ----------------------------------------------------------------------------- the run limit


def test_a_second_tab_does_not_reset_the_run_limit(shared_env):
    """One heavy run per minute: the first tab's extraction counts for the second tab too."""
    shared_env.setenv("ISOSCOPE_RUNS_PER_MINUTE", "1")
    access.reset_policy()
    corpus = {
        "corpus_kind": "paste",
        "corpus_text": "the cat sat on the mat .\na dog ran in the park !",
        "settings": ExtractionSettings(max_length=16, sample_size=50),
    }
    first = shared_app("random:bert:layers=2,width=32,heads=2,seed=11", **corpus)
    first.run()
    assert not first.exception and not first.error, [e.value for e in first.error]
    second = shared_app("random:bert:layers=2,width=32,heads=2,seed=12", **corpus)
    second.run()
    assert not second.exception
    errors = [shown(e.value) for e in second.error]
    assert any("1 heavy runs per minute per visitor" in e for e in errors), errors
