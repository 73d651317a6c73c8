"""The measured speed of a device and the first look it predicts (backend/engine/budget/throughput.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from backend.engine.budget import estimates, throughput
from backend.engine.inputs.corpus import Corpus


@pytest.fixture(autouse=True)
def _a_known_cache(monkeypatch):
    """The cache knee of a machine with a 4 GB last-level cache, whatever this machine has; no
    fixed extraction cost unless a test sets one (it has its own test)."""
    monkeypatch.setattr(throughput, "cache_knee", lambda device: 10**9)
    monkeypatch.setattr(throughput, "EXTRACTION_FIXED_S", 0.0)


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
    cost = throughput.page_cost(_loaded(10**6, load_seconds=1.0), tmp_path, BATCHING)
    assert cost.fixed_s == pytest.approx(1.0 + throughput.FRAME_SECONDS + 3.0)


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


BATCHING = throughput.Batching(batch_size=4, token_budget=10**6)


@pytest.fixture(autouse=True)
def _plans_to_the_whole_budget(monkeypatch):
    """The sizes below are computed against the whole budget; the share has its own test."""
    monkeypatch.setattr(throughput, "PLANNED_SHARE", 1.0)


def test_a_first_look_plans_to_a_share_of_the_budget(monkeypatch):
    monkeypatch.setattr(throughput, "PLANNED_SHARE", 0.9)
    assert throughput.first_look_size([10] * 100, _cost(0.1), budget_s=60) == 54


def _cost(per_token: float, fixed: float = 0.0) -> throughput.PageCost:
    return throughput.PageCost(fixed, per_token, 0.0, BATCHING)


def test_first_look_size_fits_the_budget():
    assert throughput.first_look_size([10] * 100, _cost(0.1), budget_s=60) == 60
    assert throughput.first_look_size([10] * 100, _cost(0.001), budget_s=60) == 100
    assert throughput.first_look_size([10] * 100, _cost(100.0), budget_s=60) == 8  # the minimum
    assert throughput.first_look_size([10] * 100, _cost(0.1, fixed=30), budget_s=60) == 30
    # a first look pays for its long text's batch: the page costs the padded tokens
    assert _cost(1.0).seconds([10, 10, 50, 10, 10, 10]) == 4 * 50 + 2 * 10


def _loaded(parameters: int, load_seconds: float = 0.0, layers: int = 1, width: int = 4):
    return SimpleNamespace(
        model=torch.nn.Linear(parameters, 1, bias=False),
        device="cpu",
        info=SimpleNamespace(num_layers=layers, hidden_size=width),
        load_seconds=load_seconds,
    )


def test_plan_first_look_is_a_prefix_corpus_of_its_own(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(100)), "bundled")
    loaded = _loaded(1000)
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # 1 s per token (and the statistics' µs)
    budget = 61 + throughput.FRAME_SECONDS
    plan = throughput.plan_first_look(loaded, corpus, [2] * 100, tmp_path, budget_s=budget)
    assert plan is not None and plan.texts == 30 and plan.total_texts == 100
    assert plan.corpus.texts == corpus.texts[:30] and plan.corpus.sha != corpus.sha
    assert plan.full_seconds == pytest.approx(200.0, rel=1e-4)  # and the statistics prior
    assert "first look: 30 of 100 texts" in plan.describe()


def test_the_first_look_budgets_the_load_and_the_statistics_too(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(100)), "bundled")
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # extraction: 1 s per token
    # statistics: 0.5 s per token of 2 states x 4 dims, measured on this machine
    throughput.record_statistics(tmp_path, 8, 40, 20.0 * 8)
    loaded = _loaded(1000, load_seconds=15.0 - throughput.FRAME_SECONDS, layers=1, width=4)
    assert throughput.statistics_seconds_per_token(loaded, tmp_path) == pytest.approx(4.0)
    plan = throughput.plan_first_look(loaded, corpus, [1] * 100, tmp_path, budget_s=60)
    # 60 s - 15 s of load and frame leaves 45 s for 1 + 4 s per token: 9 texts of one token
    assert plan is not None and plan.texts == 9
    assert plan.seconds == pytest.approx(15.0 + 9 * 5.0)
    assert plan.full_seconds == pytest.approx(100 * 5.0)


def test_before_a_statistics_measurement_the_prior_is_budgeted(tmp_path):
    loaded = _loaded(1000, layers=23, width=1024)
    per_token = throughput.statistics_seconds_per_token(loaded, tmp_path)
    assert per_token == pytest.approx(throughput.STATISTICS_PRIOR * 24 * 1024)
    throughput.record_statistics(tmp_path, 24 * 1024, 1000, throughput.MIN_RECORD_SECONDS / 2)
    assert throughput.statistics_seconds_per_token(loaded, tmp_path) == per_token  # too short


def test_a_corpus_that_fits_with_its_load_has_no_first_look(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(10)), "bundled")
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # 1 s per token: 20 s for the corpus
    frame = throughput.FRAME_SECONDS
    assert (
        throughput.plan_first_look(_loaded(1000, 30 - frame), corpus, [2] * 10, tmp_path, 60)
        is None
    )
    assert throughput.plan_first_look(_loaded(1000, 50 - frame), corpus, [2] * 10, tmp_path, 60)


def test_no_first_look_when_the_whole_corpus_fits(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(10)), "bundled")
    throughput.record(tmp_path, "cpu", 1000, 10000, 10.0)
    assert throughput.plan_first_look(_loaded(1000), corpus, [2] * 10, tmp_path, 60) is None


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(throughput.BUDGET_ENV, "30")
    assert throughput.first_look_budget() == 30.0
    monkeypatch.setenv(throughput.BUDGET_ENV, "soon")
    assert throughput.first_look_budget() == throughput.FIRST_LOOK_SECONDS


def test_the_time_preflight_multiplies_parameters_tokens_and_the_measured_rate(tmp_path):
    class Tokenizer:  # one token per word
        def __call__(self, texts, truncation, max_length):
            return {"input_ids": [t.split()[:max_length] for t in texts]}

    corpus = Corpus(("a b c", "d e f g h"), "two")
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # 1e-3 s per token-parameter
    estimate = throughput.estimate_first_page(tmp_path, "cpu", 1000, Tokenizer(), corpus, 4)
    # 3 and 4 tokens in one batch run 2 x 4 padded tokens: 8 s
    assert estimate.tokens == 7 and estimate.seconds == pytest.approx(8.0)
    assert estimate.describe() == (
        "first page: about 8 s on cpu: extraction about 8 s (0.0 M parameters x 7 tokens; "
        "extraction speed measured at this size)"
    )
    assert "first look" not in estimate.describe(first_look_s=60)
    assert estimate.describe(first_look_s=5).endswith("opens with a first look of 5 s or less")
    unmeasured = throughput.estimate_first_page(tmp_path, "cuda:X", 1000, Tokenizer(), corpus, 4)
    assert unmeasured.seconds is None and unmeasured.total_seconds is None
    assert "no extraction speed measured on cuda:X yet" in unmeasured.describe()
    assert throughput.estimate_first_page(tmp_path, "cpu", 1000, None, corpus, 4) is None


def test_the_phases_before_the_extraction_are_named_and_in_the_total(tmp_path):
    load = throughput.Phase("load", 30.0, throughput.PRIOR_BASIS)
    conversion = throughput.Phase("conversion", 90.0, "measured at this size")
    estimate = throughput.TimeEstimate(1_500_000_000, 5192, "cpu", 60.0, "from 3 smaller models")
    phased = throughput.TimeEstimate(**{**estimate.__dict__, "before": (conversion, load)})
    assert phased.total_seconds == pytest.approx(180.0)
    assert phased.describe() == (
        "first page: about 3 min on cpu: conversion about 90 s, load about 30 s, extraction "
        "about 60 s (1,500.0 M parameters x 5,192 tokens; extraction speed from 3 smaller "
        "models; load at a prior speed)"
    )
    assert "first look" in phased.describe(first_look_s=120)  # the total, not the extraction
    assert "first look" not in estimate.describe(first_look_s=120)


def test_a_phase_uses_its_prior_until_a_load_records_it(tmp_path):
    prior = throughput.phase_estimate(tmp_path, throughput.LOAD, "cpu", 10**9)
    per_unit, fixed = throughput.PHASE_PRIORS[throughput.LOAD]
    assert prior.seconds == pytest.approx(fixed + per_unit * 10**9)
    assert prior.basis == throughput.PRIOR_BASIS
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
        throughput.PRIOR_BASIS  # a load is the device's own
    )
    download = throughput.phase_estimate(tmp_path, throughput.DOWNLOAD, "cpu", 10**6)
    assert download.basis == throughput.PRIOR_BASIS  # under MIN_PHASE_SECONDS: not kept


def test_the_phases_before_a_folder_a_gguf_and_a_hub_snapshot(tmp_path, monkeypatch):
    from backend.engine.load import gguf, hub

    folder = tmp_path / "ckpt"
    folder.mkdir()
    assert [p.name for p in throughput.phases_before(tmp_path, "cpu", 10**6, folder)] == ["load"]
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr(gguf, "is_converted", lambda path: False)
    names = [p.name for p in throughput.phases_before(tmp_path, "cpu", 10**6, model)]
    assert names == ["conversion", "load"]
    monkeypatch.setattr(gguf, "is_converted", lambda path: True)
    assert [p.name for p in throughput.phases_before(tmp_path, "cpu", 10**6, model)] == ["load"]
    snapshot = tmp_path / "hub" / "models--a--b" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"torch_dtype": "bfloat16"}')
    monkeypatch.setattr(hub, "hub_cache_dir", lambda: tmp_path / "hub")
    download, load = throughput.phases_before(tmp_path, "cpu", 10**6, snapshot)
    assert download.name == "download" and load.name == "load"
    per_byte, fixed = throughput.PHASE_PRIORS["download"]
    assert download.seconds == pytest.approx(fixed + 2 * 10**6 * per_byte)  # bf16: 2 bytes
    (snapshot / "model.safetensors").write_bytes(b"")  # the weights are there: no download
    assert [p.name for p in throughput.phases_before(tmp_path, "cpu", 10**6, snapshot)] == ["load"]


def test_a_16_bit_checkpoints_load_is_estimated_from_16_bit_loads(tmp_path):
    wide, narrow = tmp_path / "f32", tmp_path / "bf16"
    for folder, dtype in ((wide, "float32"), (narrow, "bfloat16")):
        folder.mkdir()
        (folder / "config.json").write_text(f'{{"dtype": "{dtype}"}}')
    assert throughput.load_phase(narrow) == throughput.LOAD_16
    assert throughput.load_phase(wide) == throughput.LOAD
    assert throughput.load_phase(tmp_path / "m.gguf") == throughput.LOAD  # its float32 copy
    throughput.record_phases(
        tmp_path, SimpleNamespace(device="cpu", phases=((throughput.LOAD_16, 10**9, 9.0),))
    )
    (load,) = throughput.phases_before(tmp_path, "cpu", 10**9, narrow)
    assert load.name == "load" and load.seconds == pytest.approx(9.0)
    (load,) = throughput.phases_before(tmp_path, "cpu", 10**9, wide)
    assert load.basis == throughput.PRIOR_BASIS  # a float32 load has no record yet


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
