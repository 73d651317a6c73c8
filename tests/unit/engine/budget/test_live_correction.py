"""A run read against its announced time: a new estimate said once, only outside 0.7-1.4x of
the announcement, from the first batches on, with the longest texts first weighed as the work
they are (backend/engine/budget/progress.py, batching.py)."""

from __future__ import annotations

import pytest

from isoscope.engine.budget.batching import Batching, work_shares
from isoscope.engine.budget.progress import CORRECTION_BAND, LiveCorrection, correction_text


@pytest.mark.parametrize(
    ("announced", "projected", "says"),
    [
        (52.0, 95.0, "taking longer than announced: about 95 s in all, not 52 s"),
        (52.0, 30.0, "faster than announced: about 30 s in all, not 52 s"),
        (60.0, 600.0, "taking longer than announced: about 10 min in all, not 60 s"),
        (300.0, 100.0, "faster than announced: about 100 s in all, not 5 min"),
    ],
)
def test_outside_the_band_the_new_estimate_is_said_plainly(announced, projected, says):
    assert correction_text(announced, projected) == says


@pytest.mark.parametrize("ratio", [0.7, 0.71, 0.9, 1.0, 1.2, 1.39, 1.4])
def test_inside_the_band_nothing_is_said(ratio):
    assert correction_text(50.0, 50.0 * ratio) is None


def run(correction: LiveCorrection, seconds_per_unit: float, total: int = 10) -> list:
    """The corrections said over a run of ``total`` equal units at ``seconds_per_unit``."""
    return [correction.check(done, total, done * seconds_per_unit) for done in range(1, total + 1)]


@pytest.mark.parametrize("factor", [0.3, 0.5, 0.69, 1.41, 1.9, 4.0])
def test_a_run_outside_the_band_says_so_once_within_its_first_batches(factor):
    correction = LiveCorrection(announced_s=10.0)  # 10 units at 1 s announced
    said = run(correction, seconds_per_unit=factor)
    assert said[0] is None  # the first batch alone also pays the warm-up
    assert said[1] is not None  # the second says it
    assert sum(s is not None for s in said) == 1
    low, high = CORRECTION_BAND
    assert ("longer" in said[1]) == (factor > high) and ("faster" in said[1]) == (factor < low)


@pytest.mark.parametrize("factor", [0.75, 1.0, 1.3])
def test_a_run_inside_the_band_says_nothing(factor):
    assert run(LiveCorrection(announced_s=10.0), seconds_per_unit=factor) == [None] * 10


def test_the_time_before_the_run_counts_in_all():
    # announced 52 s in all; the load took 20 s, the extraction runs at twice its announced 32 s
    correction = LiveCorrection(announced_s=52.0, before_s=20.0)
    correction.check(1, 10, 6.4)
    assert correction.check(2, 10, 12.8) == (
        "taking longer than announced: about 84 s in all, not 52 s"
    )


def test_a_redrawn_bar_at_the_same_count_is_one_report():
    correction = LiveCorrection(announced_s=10.0)
    assert [correction.check(1, 10, 3.0) for _ in range(5)] == [None] * 5
    assert correction.check(2, 10, 6.0) is not None


@pytest.mark.parametrize(
    "counts",
    [
        [40] * 8 + [4] * 56,  # a few long texts first, then many short ones
        [64, 50, 30, 12, 10, 8, 6, 5, 3, 3, 2, 1] * 6,
        list(range(1, 97)),
    ],
)
def test_the_longest_texts_first_are_weighed_as_their_work(counts):
    """A run at exactly its announced rate per padded token is not called slow on its first
    batches, which hold the longest texts: the shares weigh them; counting texts would."""
    batching = Batching(8, 10_000)
    shares = work_shares(counts, batching)
    assert shares[0] == 0.0 and shares[-1] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(shares, shares[1:], strict=False))
    total = len(counts)
    announced = 100.0
    weighed = LiveCorrection(announced, shares=tuple(shares))
    naive = LiveCorrection(announced)
    said, naive_said = [], []
    for done in range(8, total, 8):  # a report per batch, each on time
        elapsed = announced * shares[done]
        said.append(weighed.check(done, total, elapsed))
        naive_said.append(naive.check(done, total, elapsed))
    assert said == [None] * len(said)
    assert any(s is not None for s in naive_said)  # the rule that counts texts would mislead


def test_the_clis_progress_line_says_the_new_estimate_once(capsys, monkeypatch):
    import argparse

    from isoscope.commands import common
    from isoscope.engine.budget.time_estimate import TimeEstimate

    clock = [100.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: clock[0])
    args = argparse.Namespace()
    estimate = TimeEstimate(10**9, 1000, "cpu", 50.0, "from 2 smaller models")  # 50 s in all
    args.first_page = (estimate, 98.0)  # announced 2 s before the extraction starts
    printer = common.ProgressPrinter("extracting 10 texts", common._live_correction(args))
    for done in range(1, 11):
        clock[0] += 9.3  # 93 s for the 10 texts: 95 s in all
        printer(done, 10)
    lines = capsys.readouterr().err.replace("\r", "\n").splitlines()
    said = [line for line in lines if "announced" in line]
    assert said == ["taking longer than announced: about 95 s in all, not 50 s"]
    assert common._live_correction(args) is None  # one first page, read once
