"""The one memo of model facts (isoscope.engine.arch.memo): per fingerprint, bounded; per module
object, weakly."""

from __future__ import annotations

import gc

import torch

from isoscope.engine.arch.memo import MODELS_KEPT, TRACED, ModelFacts, forget_all


class Loaded:
    def __init__(self, fingerprint):
        self.fingerprint = fingerprint
        self.model = torch.nn.Linear(1, 1)


def test_a_fact_is_computed_once_per_fingerprint_and_the_oldest_is_dropped():
    facts = ModelFacts(per_module=False)
    calls = []
    first = Loaded("fp-0")
    assert facts.get_or_compute(first, lambda: calls.append(0) or "a") == "a"
    assert facts.get_or_compute(Loaded("fp-0"), lambda: "b") == "a" and calls == [0]
    for i in range(1, MODELS_KEPT + 1):
        facts.get_or_compute(Loaded(f"fp-{i}"), lambda: "c")
    assert facts.get_or_compute(first, lambda: "new") == "new"


def test_a_bare_module_is_remembered_while_it_lives():
    facts = ModelFacts(per_module=True)
    module = torch.nn.Linear(1, 1)
    assert facts.get_or_compute(module, lambda: "x") == "x"
    assert facts.get_or_compute(module, lambda: "y") == "x"
    assert len(facts._by_module) == 1
    del module
    gc.collect()
    assert len(facts._by_module) == 0
    without = ModelFacts(per_module=False)
    other = torch.nn.Linear(1, 1)
    without.get_or_compute(other, lambda: "x")
    assert without.get_or_compute(other, lambda: "y") == "y"


def test_forget_all_empties_the_shared_memos():
    module = torch.nn.Linear(1, 1)
    TRACED.get_or_compute(module, lambda: "traced")
    forget_all()
    assert TRACED.get_or_compute(module, lambda: "again") == "again"
