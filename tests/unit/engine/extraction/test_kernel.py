"""The moments of a batch, run eagerly with torch (isoscope.engine.extraction.stats.moments) or by
the compiled CPU kernel (isoscope.engine.extraction.kernel.MomentsKernel). Both equal a float64
numpy reference on planted signals, the kernel with its extreme-index counts too. The kernel
leaves what it does not cover (non-finite values, other dtypes and devices) to eager torch, never
compiles on a call, and a failed compile leaves extraction eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import isoscope.engine.extraction.forward as extract_module
import isoscope.engine.extraction.kernel as kernel_module
import isoscope.engine.extraction.sample as sample_module
import isoscope.engine.extraction.stats as stats_module
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.extraction.forward import _Batch, _BatchPlan, _reduce_batch
from isoscope.engine.extraction.kernel import MomentsKernel
from isoscope.engine.extraction.sample import SampleCandidates
from isoscope.engine.extraction.stats import RunningStats, WorkBuffers, moments
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.load.models import load_model


def _planted(g: int = 3, n: int = 211, d: int = 40, seed: int = 0) -> np.ndarray:
    """float32 activations: per-dimension scales and offsets, one massive dimension (offset 3,000,
    spread 0.01: float32 sums of squares would cancel), one constant dimension (ties: the
    extreme index is the first)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(g, n, d)) * rng.uniform(0.1, 5, size=d) + rng.normal(0, 3, size=d)
    x[:, :, 5] = 3000.0 + rng.normal(0, 0.01, size=(g, n))
    x[:, :, 9] = -2.5
    x[:, ::7, 2] = -1e4  # every 7th token: a minimum tied between dimensions 2 and 3
    x[:, ::7, 3] = -1e4
    return x.astype(np.float32)


def _reference(x: np.ndarray) -> list[np.ndarray]:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1)
    m2 = ((x64 - mean[:, None, :]) ** 2).sum(axis=1)
    return [mean, np.abs(x64).sum(axis=1), m2, x64.min(axis=1), x64.max(axis=1)]


def _counts(x: np.ndarray) -> list[np.ndarray]:
    g, _, d = x.shape
    return [
        np.stack([np.bincount(f(x[s], axis=1), minlength=d) for s in range(g)])
        for f in (np.argmin, np.argmax)
    ]


def _assert_moments(got, x: np.ndarray) -> None:
    names = ("mean", "abs_sum", "m2", "min", "max")
    for name, a, b in zip(names, got, _reference(x), strict=False):
        a = a.detach().to("cpu", torch.float64).numpy()
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)
    if len(got) == 7:  # the kernel's extreme-index counts
        for name, a, b in zip(("argmin", "argmax"), got[5:], _counts(x), strict=True):
            np.testing.assert_array_equal(a.numpy(), b, err_msg=name)


def _reduced(kernel: MomentsKernel, x: torch.Tensor) -> list[torch.Tensor] | None:
    """The kernel's seven (g, d) results for x, or None where it leaves x to eager torch."""
    g, d = x.shape[0], x.shape[-1]
    out = [np.full((g, d), -7.0) for _ in range(5)] + [np.full((g, d), -7) for _ in range(2)]
    if not kernel.reduce_into(x, out):
        return None
    return [torch.from_numpy(a) for a in out]


@pytest.fixture(scope="module")
def kernel() -> MomentsKernel:
    """A compiled kernel of its own, so the process-wide MOMENTS stays eager for other tests
    (conftest turns compiling off; these tests opt in)."""
    k = MomentsKernel()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ISOSCOPE_COMPILE", "1")
        seconds = k.compile(torch.float32)
        assert seconds is not None and seconds > 0, f"numba failed here: {k.error}"
        assert k.compile(torch.float64) is not None
    assert k.compile(torch.float32) == 0.0  # once per process
    assert k.ready(torch.float32) and k.ready(torch.float64)
    return k


def test_eager_moments_equal_the_float64_reference():
    x = _planted()
    scratch = torch.empty(x.shape, dtype=torch.float64)
    _assert_moments(moments(torch.from_numpy(x), scratch), x)
    _assert_moments(moments(torch.from_numpy(x)), x)  # without scratch


def test_the_kernel_equals_the_reference_for_any_shape(kernel):
    """Group sizes, token counts and widths (one state, one token, a width no vector divides)."""
    for g, n, d, seed in ((3, 211, 40, 0), (8, 737, 384, 1), (1, 5, 7, 2), (2, 1, 13, 3)):
        x = (
            _planted(g, n, d, seed)
            if d > 9
            else np.random.default_rng(seed).normal(size=(g, n, d)).astype(np.float32)
        )
        got = _reduced(kernel, torch.from_numpy(x))
        assert got is not None, (g, n, d)
        _assert_moments(got, x)
        _assert_moments(_reduced(kernel, torch.from_numpy(x.astype(np.float64))), x)


def test_the_kernel_leaves_what_it_does_not_cover_to_eager(kernel):
    x = torch.from_numpy(_planted())
    assert _reduced(kernel, x.transpose(1, 2)) is None  # not contiguous
    assert _reduced(kernel, x.to(torch.bfloat16)) is None  # a dtype it was not compiled for
    assert _reduced(kernel, x[:, :0]) is None  # no tokens
    with kernel.suspended():
        assert _reduced(kernel, x) is None
    assert _reduced(kernel, x) is not None
    for bad in (float("nan"), float("inf"), float("-inf")):  # torch's propagation decides
        y = x.clone()
        y[1, 4, 7] = bad
        assert _reduced(kernel, y) is None


def test_non_finite_activations_reduce_as_torch_does(kernel, monkeypatch):
    monkeypatch.setattr(stats_module, "MOMENTS", kernel)
    x = torch.from_numpy(_planted(2, 50, 16))
    x[0, 3, 4] = float("nan")
    x[1, 5, 6] = float("inf")
    stats = _batch_stats(x)
    with kernel.suspended():
        eager = _batch_stats(x)
    for name in ("mean", "m2", "min", "max", "argmin_count", "argmax_count"):
        np.testing.assert_array_equal(getattr(stats, name), getattr(eager, name), name)
    assert np.isnan(stats.mean[0, 4]) and np.isinf(stats.max[1, 6])


def test_running_stats_with_the_kernel_equal_full_batch(kernel, monkeypatch):
    monkeypatch.setattr(stats_module, "MOMENTS", kernel)
    x = _planted(4, 300, 24)
    calls = []
    original = MomentsKernel.reduce_into

    def counted(self, t, out):
        done = original(self, t, out)
        calls.append(done)
        return done

    monkeypatch.setattr(MomentsKernel, "reduce_into", counted)
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
    argmin, argmax = _counts(x)
    np.testing.assert_array_equal(stats.argmin_count, argmin)
    np.testing.assert_array_equal(stats.argmax_count, argmax)


def _batch_stats(x: torch.Tensor) -> RunningStats:
    out = RunningStats(x.shape[0], x.shape[2])
    out.add_states(0, x)
    return out


def _use(kernel: MomentsKernel, monkeypatch) -> list[int]:
    """Extraction with ``kernel`` in every module that reads it; returns a list that grows by
    one per state the batch path reduces with it."""
    for module in (extract_module, stats_module, sample_module):
        monkeypatch.setattr(module, "MOMENTS", kernel)
    calls: list[int] = []
    original = kernel.reduce_state

    def counted(values, s, out):
        calls.append(s)
        return original(values, s, out)

    monkeypatch.setattr(kernel, "reduce_state", counted)
    return calls


@pytest.mark.parametrize("sample_size", [100, 100_000])  # part of the tokens sampled, or all
def test_extraction_with_the_kernel_equals_eager(kernel, tiny_bert_dir, monkeypatch, sample_size):
    loaded = load_model(str(tiny_bert_dir))
    corpus = Corpus(
        tuple(f"text {i} " + "alpha beta gamma delta " * (i % 7 + 1) for i in range(40)), "t"
    )
    settings = ExtractionSettings(batch_size=8, sample_size=sample_size)
    eager = extract(loaded, corpus, settings)
    calls = _use(kernel, monkeypatch)
    compiled = extract(loaded, corpus, settings)
    assert len(calls) == 5 * loaded.info.num_layers + 5  # 5 batches, every state by the kernel
    for name in ("mean", "variance", "min", "max", "mean_abs"):
        np.testing.assert_allclose(
            getattr(compiled, name), getattr(eager, name), rtol=1e-12, atol=1e-12, err_msg=name
        )
    for name in ("argmin_count", "argmax_count", "sample_vectors", "sample_index"):
        np.testing.assert_array_equal(getattr(compiled, name), getattr(eager, name), name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_batch_with_the_kernel_equals_eager_non_finite_included(kernel, monkeypatch, dtype):
    """The batch path itself (padded states, analysed rows, sampled rows to their slots): equal
    to eager torch, and a state with a NaN or an infinity makes the whole batch eager."""
    rng = np.random.default_rng(5)
    states = [
        torch.from_numpy(_planted(1, 6 * 9, 16, s)[0].reshape(6, 9, 16)).to(dtype) for s in range(3)
    ]
    flat = np.sort(rng.choice(54, 40, replace=False)).astype(np.int64)
    pick = np.flatnonzero(rng.random(40) < 0.5).astype(np.int64)
    slots = rng.permutation(30)[: len(pick)].astype(np.int64)

    def reduced(states):
        plan = _BatchPlan(None, flat, None, None, WorkBuffers())
        sample = SampleCandidates(30, 3, 16)
        return _reduce_batch(plan, _Batch(tuple(states), flat, pick, slots), sample), sample

    calls = _use(kernel, monkeypatch)
    poisoned = [h.clone() for h in states]
    poisoned[1].view(-1, 16)[flat[10], 4] = float("nan")  # analysed tokens
    poisoned[2].view(-1, 16)[flat[0], 5] = float("-inf")
    for case in (states, poisoned):
        with kernel.suspended():
            want, want_sample = reduced(case)
        got, got_sample = reduced(case)
        for name in ("mean", "m2", "abs_sum", "min", "max"):
            np.testing.assert_allclose(
                getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-12, err_msg=name
            )
        for name in ("argmin_count", "argmax_count"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), name)
        np.testing.assert_array_equal(got_sample._vectors, want_sample._vectors)
        assert got_sample._vectors[:, slots].any()
    # Each state once per case through the kernel: a batch it found not finite goes eager at
    # once, without trying the kernel again.
    assert len(calls) == 2 * len(states)
    assert np.isnan(got.mean[1, 4]) and np.isinf(got.min[2, 5])


def test_state_rows_are_for_a_fresh_cpu_batch():
    stats = RunningStats(2, 3)
    rows = stats.state_rows(4)
    assert stats.count == 4 and len(rows) == 7 and rows[0].shape == (2, 3)
    rows[0][1, 2] = 5.0  # views: the kernel writes the statistics themselves
    assert stats.mean[1, 2] == 5.0
    with pytest.raises(ValueError):
        stats.state_rows(4)  # already filled
    with pytest.raises(ValueError):
        RunningStats(2, 3).state_rows(0)  # no tokens


def test_the_row_copy_leaves_what_it_does_not_cover_to_numpy(kernel):
    src = np.ones((4, 3), dtype=np.float32)
    dst = np.zeros((5, 3), dtype=np.float32)
    idx = np.array([0, 1], dtype=np.int64)
    assert kernel.copy_rows(src, idx, idx, dst) and dst[:2].all()
    assert not kernel.copy_rows(src.astype(np.float16), idx, idx, dst)
    assert not kernel.copy_rows(src[:, ::2], idx, idx, dst)  # not contiguous
    assert not kernel.copy_rows(src, idx.astype(np.int32), idx, dst)
    with kernel.suspended():
        assert not kernel.copy_rows(src, idx, idx, dst)


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
        raise RuntimeError("LLVM could not target this CPU\nmore detail")

    monkeypatch.setattr(kernel_module, "_check", broken)
    k = MomentsKernel()
    assert k.compile() is None
    assert k.error == "RuntimeError: LLVM could not target this CPU"
    assert not k.ready()
    assert k.compile() is None  # not retried
    assert _reduced(k, torch.from_numpy(_planted())) is None
    monkeypatch.setattr(stats_module, "MOMENTS", k)
    x = _planted(2, 50, 16)
    stats = _batch_stats(torch.from_numpy(x))
    np.testing.assert_allclose(stats.mean, _reference(x)[0], rtol=1e-12, atol=1e-12)


def test_isoscope_compile_off(monkeypatch):
    monkeypatch.setenv("ISOSCOPE_COMPILE", "0")
    k = MomentsKernel()
    assert k.compile() is None and k.error is None and not k.ready()
    assert k.compile(torch.bfloat16) is None
