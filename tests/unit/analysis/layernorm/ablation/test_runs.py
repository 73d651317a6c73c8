"""run_ablation on a tiny random BERT: the model is untouched, and its batches are the extraction's."""

from __future__ import annotations

import pytest

from isoscope.analysis.layernorm.ablation.runs import run_ablation
from tests.ablation_models import TEXTS, same, snapshot


def test_run_ablation_leaves_the_model_untouched(tiny_loaded):
    before = snapshot(tiny_loaded.model)
    report = run_ablation(tiny_loaded, TEXTS, [1, 2], random_controls=2, max_length=16)
    assert same(before, snapshot(tiny_loaded.model))
    assert report.effect.embedding_cosine[0] == pytest.approx(
        1.0
    )  # the embedding LN is not ablated
    assert (report.effect.embedding_cosine[1:] < 1).all()
    assert len(report.controls) == 2 and report.effect.mlm_loss is None


def test_ablation_batches_and_pads_with_the_extraction_helpers(tiny_loaded, monkeypatch):
    """One batching/padding rule: run_ablation's batches are plan_batches', padded by pad_rows."""
    import isoscope.analysis.layernorm.ablation.forward as forward
    from isoscope.engine.budget.batching import plan_batches
    from isoscope.engine.extraction import pad_rows

    planned, padded_widths = [], []

    def spy_plan(lengths, batch_size, token_budget=None, group=None):
        batches = plan_batches(lengths, batch_size, token_budget, group)
        planned.append([b.tolist() for b in batches])
        return batches

    def spy_pad(rows, pad_id):
        padded_widths.append(max(len(r) for r in rows))
        return pad_rows(rows, pad_id)

    monkeypatch.setattr(forward, "plan_batches", spy_plan)  # via forward.ablation_batches
    monkeypatch.setattr(forward, "pad_rows", spy_pad)
    run_ablation(tiny_loaded, TEXTS, [1], random_controls=1, batch_size=3, max_length=16, mlm=False)
    assert planned and all(len(b) <= 3 for batches in planned for b in batches)
    assert padded_widths  # every batch went through the one padding helper
