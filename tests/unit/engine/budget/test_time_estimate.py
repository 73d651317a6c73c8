"""The first page's time before the load: the phases and the extraction, named and summed
(backend/engine/budget/time_estimate.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from isoscope.engine.budget import throughput, time_estimate
from isoscope.engine.budget.estimates import PRIOR_BASIS
from isoscope.engine.inputs.corpus import Corpus

pytestmark = pytest.mark.usefixtures("known_cache")


def test_the_time_preflight_multiplies_parameters_tokens_and_the_measured_rate(tmp_path):
    class Tokenizer:  # one token per word
        def __call__(self, texts, truncation, max_length):
            return {"input_ids": [t.split()[:max_length] for t in texts]}

    corpus = Corpus(("a b c", "d e f g h"), "two")
    throughput.record(tmp_path, "cpu", 1000, 10, 10.0)  # 1e-3 s per token-parameter
    estimate = time_estimate.estimate_first_page(tmp_path, "cpu", 1000, Tokenizer(), corpus, 4)
    # 3 and 4 tokens in one batch run 2 x 4 padded tokens: 8 s
    assert estimate.tokens == 7 and estimate.seconds == pytest.approx(8.0)
    assert estimate.describe() == (
        "first page: about 8 s on cpu: extraction about 8 s (0.0 M parameters x 7 tokens; "
        "extraction speed measured at this size)"
    )
    assert "first look" not in estimate.describe(first_look_s=60)
    assert estimate.describe(first_look_s=5).endswith("opens with a first look of 5 s or less")
    unmeasured = time_estimate.estimate_first_page(tmp_path, "cuda:X", 1000, Tokenizer(), corpus, 4)
    assert unmeasured.seconds is None and unmeasured.total_seconds is None
    assert "no extraction speed measured on cuda:X yet" in unmeasured.describe()
    assert time_estimate.estimate_first_page(tmp_path, "cpu", 1000, None, corpus, 4) is None


def test_the_phases_before_the_extraction_are_named_and_in_the_total(tmp_path):
    load = throughput.Phase("load", 30.0, PRIOR_BASIS)
    conversion = throughput.Phase("conversion", 90.0, "measured at this size")
    estimate = time_estimate.TimeEstimate(1_500_000_000, 5192, "cpu", 60.0, "from 3 smaller models")
    phased = time_estimate.TimeEstimate(**{**estimate.__dict__, "before": (conversion, load)})
    assert phased.total_seconds == pytest.approx(180.0)
    assert phased.describe() == (
        "first page: about 3 min on cpu: conversion about 90 s, load about 30 s, extraction "
        "about 60 s (1,500.0 M parameters x 5,192 tokens; extraction speed from 3 smaller "
        "models; load at a prior speed)"
    )
    assert "first look" in phased.describe(first_look_s=120)  # the total, not the extraction
    assert "first look" not in estimate.describe(first_look_s=120)


def test_the_phases_before_a_folder_a_gguf_and_a_hub_snapshot(tmp_path, monkeypatch):
    from isoscope.engine.load import gguf, hub

    folder = tmp_path / "ckpt"
    folder.mkdir()
    assert [p.name for p in time_estimate.phases_before(tmp_path, "cpu", 10**6, folder)] == ["load"]
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr(gguf, "is_converted", lambda path: False)
    names = [p.name for p in time_estimate.phases_before(tmp_path, "cpu", 10**6, model)]
    assert names == ["conversion", "load"]
    monkeypatch.setattr(gguf, "is_converted", lambda path: True)
    assert [p.name for p in time_estimate.phases_before(tmp_path, "cpu", 10**6, model)] == ["load"]
    snapshot = tmp_path / "hub" / "models--a--b" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"torch_dtype": "bfloat16"}')
    monkeypatch.setattr(hub, "hub_cache_dir", lambda: tmp_path / "hub")
    download, load = time_estimate.phases_before(tmp_path, "cpu", 10**6, snapshot)
    assert download.name == "download" and load.name == "load"
    per_byte, fixed = throughput.PHASE_PRIORS["download"]
    assert download.seconds == pytest.approx(fixed + 2 * 10**6 * per_byte)  # bf16: 2 bytes
    (snapshot / "model.safetensors").write_bytes(b"")  # the weights are there: no download
    assert [p.name for p in time_estimate.phases_before(tmp_path, "cpu", 10**6, snapshot)] == [
        "load"
    ]


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
    (load,) = time_estimate.phases_before(tmp_path, "cpu", 10**9, narrow)
    assert load.name == "load" and load.seconds == pytest.approx(9.0)
    (load,) = time_estimate.phases_before(tmp_path, "cpu", 10**9, wide)
    assert load.basis == PRIOR_BASIS  # a float32 load has no record yet
