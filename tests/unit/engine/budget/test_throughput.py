"""The measured speed of a device: its records, the rate at a size, the phases before the
extraction and the Overview's statistics (backend/engine/budget/throughput.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from isoscope.engine.budget import estimates, throughput
from isoscope.engine.budget.estimates import PRIOR_BASIS

pytestmark = pytest.mark.usefixtures("known_cache")


def test_an_extraction_is_recorded_net_of_its_fixed_cost_which_every_estimate_adds(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(throughput, "EXTRACTION_FIXED_S", 3.0)
    throughput.record_extraction(tmp_path, "cpu", 10**6, 1000, 23.0)
    assert throughput.seconds_per_token_parameter(tmp_path, "cpu", 10**6) == pytest.approx(2e-8)
    assert throughput.estimate_seconds(tmp_path, "cpu", 10**6, 2000) == pytest.approx(43.0)
    throughput.record_extraction(tmp_path, "cpu", 10**7, 1000, 5.0)  # mostly fixed costs
    assert throughput.seconds_per_token_parameter(tmp_path, "cpu", 10**7) == pytest.approx(2.5e-10)
    throughput.record_extraction(tmp_path, "cpu", 10**8, 1000, 0.5)  # too short to keep
    assert throughput.extraction_rate(tmp_path, "cpu", 10**8).basis != "measured at this size"


def test_no_estimate_before_a_measurement(tmp_path):
    assert throughput.estimate_seconds(tmp_path, "cpu", 10**6, 1000) is None


def test_a_recorded_run_predicts_time_proportional_to_tokens_and_parameters(tmp_path):
    throughput.record(tmp_path, "cpu", 10**6, 1000, 20.0)
    assert throughput.estimate_seconds(tmp_path, "cpu", 10**6, 1000) == pytest.approx(20.0)
    assert throughput.estimate_seconds(tmp_path, "cpu", 2 * 10**6, 3000) == pytest.approx(120.0)
    assert throughput.estimate_seconds(tmp_path, "cuda:X", 10**6, 1000) is None  # per device


def test_the_rate_at_a_size_comes_from_the_records_by_the_one_rule(tmp_path, monkeypatch):
    throughput.record(tmp_path, "cpu", 10**4, 100, 10.0)  # a tiny model: overhead-bound
    throughput.record(tmp_path, "cpu", 10**8, 100, 10.0)
    big = throughput.extraction_rate(tmp_path, "cpu", 2 * 10**8)  # below the knee: no growth
    tiny = throughput.extraction_rate(tmp_path, "cpu", 10**4)
    assert big.per_unit == pytest.approx(10.0 / (100 * 10**8))
    assert big.basis == "from 2 smaller models"
    assert tiny.per_unit == pytest.approx(10.0 / (100 * 10**4))
    assert tiny.basis == "measured at this size"
    monkeypatch.setattr(throughput, "cache_knee", lambda device: 10**8)  # beyond it: the prior
    grown = throughput.extraction_rate(tmp_path, "cpu", 4 * 10**8)
    assert grown.per_unit == pytest.approx(1e-9 * 4**estimates.CPU_GROWTH_PRIOR)
    gpu = 10.0 / (100 * 10**8)
    throughput.record(tmp_path, "cuda:X", 10**8, 100, 10.0)  # a GPU: its own records, no prior
    assert throughput.extraction_rate(tmp_path, "cuda:X", 4 * 10**8).per_unit == pytest.approx(gpu)


def test_an_older_speeds_file_stays_readable(tmp_path):
    (tmp_path / throughput.FILE_NAME).write_text(
        '{"cpu": {"22713216": 7.7e-12, "267769856": 5.1e-12, "oops": 1.0},'
        ' "cpu · Overview statistics": {"24576": 1.6e-7}, "mps": "not rates"}'
    )
    rate = throughput.extraction_rate(tmp_path, "cpu", 267769856)
    assert rate.per_unit == 5.1e-12 and rate.basis == "measured at this size"
    throughput.record(tmp_path, "cpu", 10**9, 100, 10.0)
    assert throughput.extraction_rate(tmp_path, "cpu", 22713216).per_unit == 7.7e-12


def test_a_short_run_is_not_kept(tmp_path):
    throughput.record(tmp_path, "cpu", 10**6, 1000, throughput.MIN_RECORD_SECONDS / 2)
    assert throughput.seconds_per_token_parameter(tmp_path, "cpu", 10**6) is None


def test_a_broken_file_is_no_measurement(tmp_path):
    (tmp_path / throughput.FILE_NAME).write_text("not json")
    assert throughput.seconds_per_token_parameter(tmp_path, "cpu", 10) is None
    throughput.record(tmp_path, "cpu", 10, 10, 10.0)  # and is replaced
    assert throughput.seconds_per_token_parameter(tmp_path, "cpu", 10) == pytest.approx(0.1)


def test_before_a_statistics_measurement_the_prior_is_budgeted(tmp_path):
    loaded = SimpleNamespace(info=SimpleNamespace(num_layers=23, hidden_size=1024))
    per_token = throughput.statistics_seconds_per_token(loaded, tmp_path)
    assert per_token == pytest.approx(throughput.STATISTICS_PRIOR * 24 * 1024)
    throughput.record_statistics(tmp_path, 24 * 1024, 1000, throughput.MIN_RECORD_SECONDS / 2)
    assert throughput.statistics_seconds_per_token(loaded, tmp_path) == per_token  # too short


def test_a_phase_uses_its_prior_until_a_load_records_it(tmp_path):
    prior = throughput.phase_estimate(tmp_path, throughput.LOAD, "cpu", 10**9)
    per_unit, fixed = throughput.PHASE_PRIORS[throughput.LOAD]
    assert prior.seconds == pytest.approx(fixed + per_unit * 10**9)
    assert prior.basis == PRIOR_BASIS
    loaded = SimpleNamespace(
        device="cpu",
        phases=(("conversion", 10**9, 20.0), ("load", 10**9, 5.0), ("download", 10**6, 0.2)),
    )
    throughput.record_phases(tmp_path, loaded)
    load = throughput.phase_estimate(tmp_path, throughput.LOAD, "cpu", 2 * 10**9)
    # the record's 5 s, and the prior's per-parameter part for the parameters beyond it
    assert load.seconds == pytest.approx(5.0 + per_unit * 10**9)
    assert load.basis == "from 1 smaller model"
    conversion = throughput.phase_estimate(tmp_path, throughput.CONVERSION, "cuda:X", 10**9)
    assert conversion.seconds == pytest.approx(20.0)  # kept for the CPU, whatever the device
    assert throughput.phase_estimate(tmp_path, throughput.LOAD, "cuda:X", 10**9).basis == (
        PRIOR_BASIS  # a load is the device's own
    )
    download = throughput.phase_estimate(tmp_path, throughput.DOWNLOAD, "cpu", 10**6)
    assert download.basis == PRIOR_BASIS  # under MIN_PHASE_SECONDS: not kept


def test_a_short_extraction_is_kept_only_when_it_did_enough_per_token_work(tmp_path):
    """Under MIN_RECORD_SECONDS, a ladder's smallest model (30 M parameters x 5,280 padded tokens
    in 1.2 s) is kept; a tiny model's 2 s run, mostly per-run overhead, is not."""
    throughput.record_extraction(tmp_path, "cpu", 10**6, 1000, 2.0)
    assert throughput.extraction_rate(tmp_path, "cpu", 10**6) is None
    throughput.record_extraction(tmp_path, "cpu", 30 * 10**6, 5280, 1.2)
    rate = throughput.extraction_rate(tmp_path, "cpu", 30 * 10**6)
    assert rate.basis == "measured at this size"
    assert rate.per_unit == pytest.approx(1.2 / (30 * 10**6 * 5280))
    throughput.record_extraction(tmp_path, "cpu", 60 * 10**6, 5280, 0.5)  # too short, whatever
    assert throughput.extraction_rate(tmp_path, "cpu", 60 * 10**6).basis != "measured at this size"
