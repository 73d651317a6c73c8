"""The one rule from a device's recorded rates to the rate at a new size
(backend/engine/budget/estimates.py), on synthetic records."""

from __future__ import annotations

import math

import pytest

from isoscope.engine.budget import estimates
from isoscope.engine.budget.estimates import rate_for

KNEE = 10**8  # parameters whose weights fill the cache, in these records


def kneed_rate(size: int, growth: float = 0.5, base: float = 1e-11) -> float:
    """A CPU-like rate: flat while the weights fit the cache, growing as size ** growth beyond."""
    return base * (size / KNEE) ** growth if size > KNEE else base


def test_no_record_no_rate():
    assert rate_for({}, 10**9) is None
    assert rate_for({10**8: 1e-11}, 0) is None


def test_a_record_at_the_size_is_used_as_measured():
    records = {3 * 10**7: 4e-11, 10**9: 2e-11}
    rate = rate_for(records, 10**9, knee=KNEE, prior_growth=0.4)
    assert rate.per_unit == 2e-11 and rate.basis == "measured at this size"
    near = rate_for(records, int(1.1e9), knee=KNEE, prior_growth=0.4)  # within SAME_SIZE
    assert near.per_unit == 2e-11 and near.basis == "measured at this size"


def test_one_smaller_record_grows_by_the_prior_beyond_the_knee():
    rate = rate_for({2 * 10**8: 1e-11}, 8 * 10**8, knee=KNEE, prior_growth=0.5)
    assert rate.per_unit == pytest.approx(1e-11 * 4**0.5)
    assert rate.basis == "from 1 smaller model, x2.0 of the largest's rate for the size"


def test_growth_starts_at_the_knee_not_at_a_small_record():
    # a 30 M record inside the cache: no growth up to the knee, then the prior
    rate = rate_for({3 * 10**7: 1e-11}, 4 * 10**8, knee=KNEE, prior_growth=0.5)
    assert rate.per_unit == pytest.approx(1e-11 * 4**0.5)
    inside = rate_for({3 * 10**7: 1e-11}, 9 * 10**7, knee=KNEE, prior_growth=0.5)
    assert inside.per_unit == pytest.approx(1e-11) and inside.basis == "from 1 smaller model"


def test_records_above_the_knee_give_the_devices_own_growth():
    sizes = [5 * 10**7, 2 * 10**8, 6 * 10**8, 24 * 10**8]  # 3 beyond the knee, over a decade
    records = {n: kneed_rate(n, growth=0.3) for n in sizes}
    rate = rate_for(records, 10**10, knee=KNEE, prior_growth=0.9)
    assert rate.per_unit == pytest.approx(kneed_rate(10**10, growth=0.3))  # not the prior
    assert rate.basis.startswith("from 4 smaller models")


@pytest.mark.parametrize(
    "growth", [0.0, estimates.CPU_GROWTH_PRIOR / 2, estimates.CPU_GROWTH_PRIOR]
)
def test_extrapolation_from_smaller_records_is_conservative(growth):
    """With the device's growth at or below the prior, the first run at each new size is never
    under-announced, and the announced rate is never below the largest record's."""
    ladder = [3 * 10**7, 12 * 10**7, 4 * 10**8, 15 * 10**8]
    for i, size in enumerate(ladder[1:], start=1):
        records = {n: kneed_rate(n, growth) for n in ladder[:i]}
        rate = rate_for(records, size, knee=KNEE, prior_growth=estimates.CPU_GROWTH_PRIOR)
        assert rate.per_unit >= kneed_rate(size, growth) * (1 - 1e-9)
        assert rate.per_unit >= max(records.values())
        assert rate.basis.startswith(f"from {i} smaller model")


def test_close_records_do_not_fit_a_growth_and_one_slow_run_counts_for_its_share():
    records = {2 * 10**8: 1e-11, 6 * 10**8: 3e-11}  # one slow run: a slope of 1.0
    rate = rate_for(records, 12 * 10**8, knee=KNEE, prior_growth=0.4)
    both = math.sqrt(1e-11 * 6**0.4 * 3e-11 * 2**0.4)  # each grown by the prior, then averaged
    assert rate.per_unit == pytest.approx(both)


def test_a_falling_rate_beyond_the_knee_is_not_extrapolated_downward():
    records = {2 * 10**8: 2e-11, 4 * 10**9: 1e-11}  # fixed costs spreading: a negative slope
    rate = rate_for(records, 8 * 10**9, knee=KNEE, prior_growth=0.4)
    assert rate.per_unit == pytest.approx(math.sqrt(2e-11 * 1e-11))  # no growth, no fall


def test_growth_is_capped():
    records = {2 * 10**8: 1e-12, 4 * 10**9: 1e-8}  # a slope of 3.1: a measurement gone wrong
    rate = rate_for(records, 8 * 10**9, knee=KNEE)
    grown = [1e-12 * 40**estimates.MAX_GROWTH, 1e-8 * 2**estimates.MAX_GROWTH]
    assert rate.per_unit == pytest.approx(math.sqrt(grown[0] * grown[1]))


def test_between_two_records_the_rate_is_interpolated_in_log_size():
    records = {10**8: 1e-11, 10**10: 4e-11}
    middle = rate_for(records, 10**9, knee=KNEE, prior_growth=0.4)
    assert middle.per_unit == pytest.approx(2e-11)  # half way in log size, geometric mean
    assert middle.basis == "between the measured 100 M and 10.0 B"
    sizes = [int(10 ** (8 + k / 10)) for k in range(21)]
    rates = [rate_for(records, n).per_unit for n in sizes]
    assert rates == sorted(rates)  # monotone between the two


def test_below_the_smallest_record_its_rate_is_used():
    rate = rate_for({10**9: 2e-11, 10**10: 3e-11}, 10**7)
    assert rate.per_unit == 2e-11 and rate.basis == "from a larger model (1.0 B)"


def test_a_gpu_has_no_growth_prior_and_a_cpu_has_one():
    assert estimates.growth_prior("cuda:NVIDIA H100") == 0.0
    assert estimates.growth_prior("cpu") == estimates.CPU_GROWTH_PRIOR


def test_the_cpu_knee_is_the_last_level_cache_in_float32_parameters(monkeypatch):
    monkeypatch.setattr(estimates, "_cpu_cache_bytes", lambda: 300 * 1024**2)
    assert estimates.cache_knee("cpu") == 300 * 1024**2 // 4
    assert estimates.cache_knee("mps") == 0


def test_a_phase_is_a_fixed_part_plus_a_part_per_unit():
    prior = estimates.phase_seconds({}, 10**9, prior_per_unit=1e-9, prior_fixed=2.0)
    assert prior.per_unit == pytest.approx(3.0) and prior.basis == estimates.PRIOR_BASIS
    one = {10**8: 4.0 / 10**8}  # a 100 M load took 4 s: mostly fixed costs
    bigger = estimates.phase_seconds(one, 10**9, prior_per_unit=1e-9, prior_fixed=2.0)
    assert bigger.per_unit == pytest.approx(4.0 + 1e-9 * 9 * 10**8)  # not 40 s
    fast = {10**8: 0.05 / 10**8}  # faster per unit than the prior: its own rate
    assert estimates.phase_seconds(fast, 10**9, 1e-9, 2.0).per_unit == pytest.approx(0.5)
    two = {10**8: 4.0 / 10**8, 5 * 10**8: 8.0 / (5 * 10**8)}  # 1e-8 s per unit between them
    above = estimates.phase_seconds(two, 10**9, prior_per_unit=1e-9, prior_fixed=2.0)
    assert above.per_unit == pytest.approx(13.0) and above.basis == "from 2 smaller models"
    between = estimates.phase_seconds(two, 3 * 10**8, 1e-9, 2.0)
    assert between.per_unit == pytest.approx(6.0)
    falling = {10**8: 4.0 / 10**8, 5 * 10**8: 3.0 / (5 * 10**8)}  # noise: never less than the prior
    assert estimates.phase_seconds(falling, 10**9, 1e-9, 2.0).per_unit == pytest.approx(3.5)
    at = estimates.phase_seconds(two, 10**8, 1e-9, 2.0)
    assert at.per_unit == pytest.approx(4.0) and at.basis == "measured at this size"
