"""A shared server's per-visitor rules hold against a visitor who opens more tabs, guesses the
passphrase, or forges a proxy header: the run limit counts the visitor (their address), not the
tab; wrong passphrases lock that visitor out for longer and longer without holding up anyone
else. (Who a visitor is, and the lockout's arithmetic, are unit-tested in
tests/unit/engine/serve/test_visitors.py.)"""

from __future__ import annotations

from isoscope.engine.extraction import ExtractionSettings
from isoscope.ui.server import access
from tests.app.conftest import shown
from tests.hostile.conftest import shared_app

# ----------------------------------------------------------------------------- the passphrase


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
