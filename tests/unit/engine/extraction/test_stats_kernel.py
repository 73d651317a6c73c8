"""The moments of a batch: one implementation, run eagerly or compiled (backend.engine.extraction.stats.moments and
MomentsKernel). Both equal a float64 numpy reference on planted signals; the compiled kernel is
used only where its compiled code applies and never compiles on a call; a failed compile leaves
extraction eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import backend.engine.extraction.forward as extract_module
import backend.engine.extraction.stats as stats_module
from backend.engine.extraction import ExtractionSettings, extract
from backend.engine.extraction.stats import MomentsKernel, RunningStats, moments
from backend.engine.inputs.corpus import Corpus
from backend.engine.load.models import load_model


def _planted(g: int = 3, n: int = 211, d: int = 40, seed: int = 0) -> np.ndarray:
    """float32 activations: per-dimension scales and offsets, one massive dimension (offset 3,000,
    spread 0.01: float32 sums of squares would cancel), one constant dimension."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(g, n, d)) * rng.uniform(0.1, 5, size=d) + rng.normal(0, 3, size=d)
    x[:, :, 5] = 3000.0 + rng.normal(0, 0.01, size=(g, n))
    x[:, :, 9] = -2.5
    return x.astype(np.float32)


def _reference(x: np.ndarray) -> list[np.ndarray]:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    m2 = ((x64 - mean[:, None, :]) ** 2).sum(axis=1)
    return [mean, np.abs(x64).sum(axis=1), m2, x64.min(axis=1), x64.max(axis=1)]


def _assert_moments(got, x: np.ndarray) -> None:
    names = ("mean", "abs_sum", "m2", "min", "max")
    for name, a, b in zip(names, got, _reference(x), strict=True):
        a = a.detach().to("cpu", torch.float64).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.fixture(scope="module")
def kernel() -> MomentsKernel:
    """A compiled kernel of its own, so the process-wide MOMENTS stays eager for other tests
    (conftest turns compiling off; these tests opt in)."""
    k = MomentsKernel()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ISOSCOPE_COMPILE", "1")
        seconds = k.compile(torch.float32)
    assert seconds is not None and seconds > 0, f"torch.compile failed here: {k.error}"
    assert k.compile(torch.float32) == 0.0  # once per process
    return k


def test_eager_moments_equal_the_float64_reference():
    x = _planted()
    scratch = torch.empty(x.shape, dtype=torch.float64)
    _assert_moments(moments(torch.from_numpy(x), scratch), x)
    _assert_moments(moments(torch.from_numpy(x)), x)  # without scratch, as compiled


def test_compiled_moments_equal_the_reference_for_new_shapes(kernel):
    """Dynamic shapes: other group sizes, token counts and widths reuse the compiled code."""
    for g, n, d, seed in ((3, 211, 40, 0), (8, 737, 384, 1), (2, 2, 7, 2)):
        x = (
            _planted(g, n, d, seed)
            if d > 9
            else np.random.default_rng(seed).normal(size=(g, n, d)).astype(np.float32)
        )
        got = kernel(torch.from_numpy(x))
        assert got is not None, (g, n, d)
        _assert_moments(got, x)


def test_the_compiled_kernel_leaves_what_it_does_not_cover_to_eager(kernel):
    x = torch.from_numpy(_planted())
    assert kernel(x[:1]) is None  # one state: specialised by dynamic shapes
    assert kernel(x[:, :1]) is None  # one token
    assert kernel(x.transpose(1, 2)) is None  # not contiguous
    assert kernel(x.to(torch.bfloat16)) is None  # a dtype it was not warmed for
    assert kernel(x.double()) is None
    with kernel.suspended():
        assert kernel(x) is None
    assert kernel(x) is not None


def test_running_stats_with_the_compiled_kernel_equal_full_batch(kernel, monkeypatch):
    monkeypatch.setattr(stats_module, "MOMENTS", kernel)
    x = _planted(4, 300, 24)
    calls = []
    original = MomentsKernel.__call__

    def counted(self, t):
        out = original(self, t)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(MomentsKernel, "__call__", counted)
    stats = RunningStats(4, 24)
    with torch.inference_mode():
        for part in np.array_split(x, 3, axis=1):
            stats.merge(_batch_stats(torch.from_numpy(np.ascontiguousarray(part))))
    assert calls and all(calls)  # every batch went through the compiled kernel
    ref = _reference(x)
    n = x.shape[1]
    np.testing.assert_allclose(stats.mean, ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.mean_abs, ref[1] / n, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stats.m2, ref[2], rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(stats.min, ref[3])
    np.testing.assert_array_equal(stats.max, ref[4])
    argmin = np.stack([np.bincount(x[s].argmin(axis=1), minlength=24) for s in range(4)])
    np.testing.assert_array_equal(stats.argmin_count, argmin)


def _batch_stats(x: torch.Tensor) -> RunningStats:
    out = RunningStats(x.shape[0], x.shape[2])
    out.add_states(0, x)
    return out


def test_extraction_with_the_compiled_kernel_equals_eager(kernel, tiny_bert_dir, monkeypatch):
    loaded = load_model(str(tiny_bert_dir))
    corpus = Corpus(
        tuple(f"text {i} " + "alpha beta gamma delta " * (i % 7 + 1) for i in range(40)), "t"
    )
    settings = ExtractionSettings(batch_size=8, sample_size=100)
    eager = extract(loaded, corpus, settings)
    monkeypatch.setattr(stats_module, "MOMENTS", kernel)
    compiled = extract(loaded, corpus, settings)
    for name in ("mean", "variance", "min", "max", "mean_abs"):
        np.testing.assert_allclose(
            getattr(compiled, name), getattr(eager, name), rtol=1e-12, atol=1e-12, err_msg=name
        )
    for name in ("argmin_count", "argmax_count", "sample_vectors", "sample_index"):
        np.testing.assert_array_equal(getattr(compiled, name), getattr(eager, name), name)


def test_a_big_corpus_compiles_the_kernel_itself(tiny_bert_dir, monkeypatch):
    """Above COMPILE_MIN_ELEMENTS an extraction on the CPU warms the kernel before its batches."""
    fresh = MomentsKernel()
    calls = []
    monkeypatch.setattr(fresh, "compile", lambda dtype=torch.float32: calls.append(dtype))
    monkeypatch.setattr(extract_module, "MOMENTS", fresh)
    loaded = load_model(str(tiny_bert_dir))
    corpus = Corpus(("one small text", "and another one"), "t")
    extract(loaded, corpus)
    assert calls == []  # small: stays eager
    monkeypatch.setattr(extract_module, "COMPILE_MIN_ELEMENTS", 1)
    extract(loaded, corpus)
    assert calls == [loaded.dtype]


def test_a_failed_compile_leaves_statistics_eager(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_COMPILE", "1")

    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", broken)
    k = MomentsKernel()
    assert k.compile() is None
    assert k.error == "RuntimeError: no C++ compiler found"
    assert not k.ready()
    assert k.compile() is None  # not retried
    assert k(torch.from_numpy(_planted())) is None
    monkeypatch.setattr(stats_module, "MOMENTS", k)
    x = _planted(2, 50, 16)
    stats = _batch_stats(torch.from_numpy(x))
    np.testing.assert_allclose(stats.mean, _reference(x)[0], rtol=1e-12, atol=1e-12)


def test_isoscope_compile_off(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_COMPILE", "0")
    k = MomentsKernel()
    assert k.compile() is None and k.error is None and not k.ready()
