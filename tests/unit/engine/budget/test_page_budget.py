"""The first page's cost by prefix and the first look that fits its budget
(backend/engine/budget/page_budget.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from isoscope.engine.budget import page_budget, throughput
from isoscope.engine.budget.batching import Batching
from isoscope.engine.inputs.corpus import Corpus

pytestmark = pytest.mark.usefixtures("known_cache")

BATCHING = Batching(batch_size=4, token_budget=10**6)


def test_the_page_cost_adds_the_fixed_extraction_cost_to_the_load_and_the_frame(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(throughput, "EXTRACTION_FIXED_S", 3.0)
    throughput.record_extraction(tmp_path, "cpu", 10**6, 1000, 23.0)
    cost = page_budget.page_cost(_loaded(10**6, load_seconds=1.0), tmp_path, BATCHING)
    assert cost.fixed_s == pytest.approx(1.0 + page_budget.FRAME_SECONDS + 3.0)


@pytest.fixture(autouse=True)
def _plans_to_the_whole_budget(monkeypatch):
    """The sizes below are computed against the whole budget; the share has its own test."""
    monkeypatch.setattr(page_budget, "PLANNED_SHARE", 1.0)


def test_a_first_look_plans_to_a_share_of_the_budget(monkeypatch):
    monkeypatch.setattr(page_budget, "PLANNED_SHARE", 0.9)
    assert page_budget.first_look_size([10] * 100, _cost(0.1), budget_s=60) == 54


def _cost(per_token: float, fixed: float = 0.0) -> page_budget.PageCost:
    return page_budget.PageCost(fixed, per_token, 0.0, BATCHING)


def test_first_look_size_fits_the_budget():
    assert page_budget.first_look_size([10] * 100, _cost(0.1), budget_s=60) == 60
    assert page_budget.first_look_size([10] * 100, _cost(0.001), budget_s=60) == 100
    assert page_budget.first_look_size([10] * 100, _cost(100.0), budget_s=60) == 8  # the minimum
    assert page_budget.first_look_size([10] * 100, _cost(0.1, fixed=30), budget_s=60) == 30
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
    budget = 61 + page_budget.FRAME_SECONDS
    plan = page_budget.plan_first_look(loaded, corpus, [2] * 100, tmp_path, budget_s=budget)
    assert plan is not None and plan.texts == 30 and plan.total_texts == 100
    assert plan.corpus.texts == corpus.texts[:30] and plan.corpus.sha != corpus.sha
    assert plan.full_seconds == pytest.approx(200.0, rel=1e-4)  # and the statistics prior
    assert "first look: 30 of 100 texts" in plan.describe()


def test_the_first_look_budgets_the_load_and_the_statistics_too(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(100)), "bundled")
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # extraction: 1 s per token
    # statistics: 0.5 s per token of 2 states x 4 dims, measured on this machine
    throughput.record_statistics(tmp_path, 8, 40, 20.0 * 8)
    loaded = _loaded(1000, load_seconds=15.0 - page_budget.FRAME_SECONDS, layers=1, width=4)
    assert throughput.statistics_seconds_per_token(loaded, tmp_path) == pytest.approx(4.0)
    plan = page_budget.plan_first_look(loaded, corpus, [1] * 100, tmp_path, budget_s=60)
    # 60 s - 15 s of load and frame leaves 45 s for 1 + 4 s per token: 9 texts of one token
    assert plan is not None and plan.texts == 9
    assert plan.seconds == pytest.approx(15.0 + 9 * 5.0)
    assert plan.full_seconds == pytest.approx(100 * 5.0)


def test_a_corpus_that_fits_with_its_load_has_no_first_look(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(10)), "bundled")
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # 1 s per token: 20 s for the corpus
    frame = page_budget.FRAME_SECONDS
    assert (
        page_budget.plan_first_look(_loaded(1000, 30 - frame), corpus, [2] * 10, tmp_path, 60)
        is None
    )
    assert page_budget.plan_first_look(_loaded(1000, 50 - frame), corpus, [2] * 10, tmp_path, 60)


def test_no_first_look_when_the_whole_corpus_fits(tmp_path):
    corpus = Corpus(tuple(f"text {i}" for i in range(10)), "bundled")
    throughput.record(tmp_path, "cpu", 1000, 10000, 10.0)
    assert page_budget.plan_first_look(_loaded(1000), corpus, [2] * 10, tmp_path, 60) is None


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(page_budget.BUDGET_ENV, "30")
    assert page_budget.first_look_budget() == 30.0
    monkeypatch.setenv(page_budget.BUDGET_ENV, "soon")
    assert page_budget.first_look_budget() == page_budget.FIRST_LOOK_SECONDS
