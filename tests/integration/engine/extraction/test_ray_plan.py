"""The Ray engine's plan (isoscope.engine.extraction.ray_plan): whole local batches per chunk and a
priority cut-off, merged in any order, give the single-process result; no Ray needed."""

from __future__ import annotations

import numpy as np

from isoscope.engine.extraction import extract, extract_partial, finish
from isoscope.engine.extraction.ray_cluster import ModelSpec
from isoscope.engine.extraction.ray_plan import plan_chunks
from isoscope.engine.extraction.ray_pool import below_threshold, sample_is_complete
from isoscope.engine.inputs.corpus import load_corpus_file
from isoscope.engine.load.models import load_model
from tests.integration.engine.extraction.test_ray_engine import SETTINGS, assert_same_result


def test_planned_chunks_reproduce_one_process_bit_for_bit(tiny_bert_dir, uneven_shards):
    """The driver's plan (whole local batches per chunk, a priority cut-off) merged in any order
    gives the single-process result: same batches, so the same float32 hidden states."""
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    corpus = load_corpus_file(uneven_shards)
    want = extract(loaded, corpus, SETTINGS)
    plan = plan_chunks(ModelSpec(str(tiny_bert_dir)), corpus, SETTINGS, workers=2)
    assert len(plan.chunks) >= 4 and plan.num_tokens == want.num_tokens
    assert sorted(np.concatenate(plan.chunks).tolist()) == list(range(len(corpus)))
    merged = None
    for chunk in reversed(plan.chunks):
        part = extract_partial(loaded, [corpus.texts[i] for i in chunk], SETTINGS, text_ids=chunk)
        part.sample = below_threshold(part.sample, plan.threshold)
        merged = part if merged is None else merged.merge(part)
    assert sample_is_complete(merged, plan.threshold)
    assert len(merged.sample) == SETTINGS.sample_size  # exactly k vectors crossed the wire
    assert_same_result(finish(merged, corpus), want)
