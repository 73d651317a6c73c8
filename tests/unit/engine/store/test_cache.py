"""isoscope.engine.store.cache: LRU eviction under a limit, temp files and model folders left alone,
one notice when nothing is kept, two processes sharing a folder."""

from __future__ import annotations

import errno
import multiprocessing
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from isoscope.engine.extraction import ExtractionResult, ExtractionSettings, TokenTable
from isoscope.engine.store import cache as cache_mod
from isoscope.engine.store.cache import ResultCache, touch

MIB = 1024**2

pytestmark = pytest.mark.usefixtures("no_process_limit")


def fake_result(seed: int, states: int = 3, k: int = 64, d: int = 1024) -> ExtractionResult:
    """A result whose sample is states*k*d*4 bytes (3*64*1024*4 = 768 KiB by default)."""
    rng = np.random.default_rng(seed)
    n = k + 3
    tokens = TokenTable(
        text_id=np.zeros(n, dtype=np.int32),
        position=np.arange(n, dtype=np.int32),
        token=np.array([f"t{i}" for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.zeros(n, dtype=bool),
        is_punct=np.zeros(n, dtype=bool),
    )
    stat = rng.normal(size=(states, d))
    return ExtractionResult(
        model={"source": "fake"},
        model_fingerprint=f"fp{seed}",
        corpus_name="c",
        corpus_sha=f"sha{seed}",
        texts=(f"text {seed}",),
        notices=(),
        settings=ExtractionSettings(sample_size=k, seed=seed),
        mean=stat,
        variance=stat**2,
        min=stat - 1,
        max=stat + 1,
        mean_abs=np.abs(stat),
        argmin_count=np.zeros((states, d), dtype=np.int64),
        argmax_count=np.zeros((states, d), dtype=np.int64),
        sample_vectors=rng.normal(size=(states, k, d)).astype(np.float32),
        sample_index=np.arange(k, dtype=np.int64),
        tokens=tokens,
    )


def _age(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


# ----------------------------------------------------------------------------- LRU eviction


def test_round_trip_and_lru_eviction(tmp_path):
    one = ResultCache(tmp_path).save("probe", fake_result(99))
    size = one.stat().st_size
    one.unlink()
    cache = ResultCache(tmp_path, limit=int(3.5 * size))  # room for three entries
    for i in range(3):
        assert cache.save(f"k{i}", fake_result(i)) is not None
        _age(cache.path(f"k{i}"), 100 - i)  # k0 oldest
    assert cache.load("k0") is not None  # a hit is a use: k0 is now the most recent
    assert cache.save("k3", fake_result(3)) is not None
    kept = {p.stem for p in tmp_path.glob("*.npz")}
    assert kept == {"k0", "k2", "k3"}  # k1 was the least recently used
    assert cache.usage().total <= cache.limit
    loaded = cache.load("k3")
    np.testing.assert_array_equal(loaded.sample_vectors, fake_result(3).sample_vectors)
    np.testing.assert_array_equal(loaded.mean, fake_result(3).mean)
    assert loaded.settings == fake_result(3).settings


def test_lowered_limit_applies_on_enforce(tmp_path):
    cache = ResultCache(tmp_path)
    for i in range(4):
        cache.save(f"k{i}", fake_result(i))
        _age(cache.path(f"k{i}"), 100 - i)
    size = cache.path("k0").stat().st_size
    removed = ResultCache(tmp_path, limit=int(1.5 * size)).enforce_limit()
    assert sorted(p.stem for p in removed) == ["k0", "k1", "k2"]
    assert [p.stem for p in tmp_path.glob("*.npz")] == ["k3"]


def test_temp_files_and_model_folders_are_counted_but_not_evicted(tmp_path):
    models = tmp_path / "models" / "smollm2-abc"
    models.mkdir(parents=True)
    (models / "model.safetensors").write_bytes(b"\0" * (2 * MIB))
    writing = tmp_path / ".kx.123.tmp"  # another process writing right now
    writing.write_bytes(b"\0" * MIB)
    stale = tmp_path / ".ky.456.tmp"  # left by a process killed two days ago
    stale.write_bytes(b"\0" * MIB)
    _age(stale, 2 * 86400)
    cache = ResultCache(tmp_path, limit=4 * MIB)
    usage = cache.usage()
    assert (usage.models_bytes, usage.temp_bytes) == (2 * MIB, 2 * MIB)
    for i in range(4):
        cache.save(f"k{i}", fake_result(i))
    assert writing.exists() and (models / "model.safetensors").exists()
    assert not stale.exists()
    usage = cache.usage()
    assert usage.total - usage.temp_bytes <= cache.limit
    assert 1 <= usage.results_count < 4
    assert "converted models 2 MiB" in usage.summary()


# ----------------------------------------------------------------------------- nothing kept: one notice


def test_limit_below_one_result_keeps_nothing_with_one_notice(tmp_path):
    cache = ResultCache(tmp_path, limit="100K")
    result = fake_result(0)
    out = cache.put("k", result)
    assert out.sample_vectors is result.sample_vectors  # computed result returned as is
    assert len(out.notices) == 1 and out.notices[0].startswith("nothing was cached")
    assert "100 KiB" in out.notices[0]
    assert not list(tmp_path.glob("*"))


def test_models_leave_no_room_keeps_nothing(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.safetensors").write_bytes(b"\0" * (3 * MIB))
    cache = ResultCache(tmp_path, limit=3 * MIB + 100 * 1024)
    out = cache.put("k", fake_result(0))
    assert "converted models" in out.notices[-1]
    assert not list(tmp_path.glob("*.npz"))


def test_full_disk_keeps_nothing_and_leaves_no_temp(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_mod.np, "savez", full)
    out = ResultCache(tmp_path).put("k", fake_result(0))
    assert "disk holding it is full" in out.notices[-1]
    assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------- clear, processes


def test_clear_leaves_files_being_written_and_models_unless_asked(tmp_path):
    cache = ResultCache(tmp_path)
    for i in range(3):
        cache.save(f"k{i}", fake_result(i))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "w.bin").write_bytes(b"\0" * 1000)
    writing = tmp_path / ".kz.1.tmp"
    writing.write_bytes(b"x")
    count, freed = cache.clear()
    assert count == 3 and freed > 3 * 700_000
    assert writing.exists() and (tmp_path / "models" / "w.bin").exists()
    count, freed = cache.clear(include_models=True)
    assert (count, freed) == (1, 1000)
    assert not (tmp_path / "models").exists()


def _writer(root: str, worker: int, limit: int) -> None:
    cache = ResultCache(root, limit=limit)
    for i in range(8):
        key = f"w{worker}_{i}"
        cache.save(key, fake_result(10 * worker + i))
        cache.save("shared", fake_result(1000 + worker))  # both write one key too
        cache.load(f"w{1 - worker}_{i}")


def test_two_processes_share_a_folder_without_corruption(tmp_path):
    size = ResultCache(tmp_path).save("probe", fake_result(0)).stat().st_size
    (tmp_path / "probe.npz").unlink()
    limit = int(4.5 * size)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, limit)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cache = ResultCache(tmp_path, limit=limit)
    files = sorted(tmp_path.glob("*.npz"))
    assert 1 <= len(files) <= 4
    assert not list(tmp_path.glob("*.tmp"))
    assert cache.usage().total <= limit
    for path in files:  # every survivor is whole and holds what its key says
        loaded = cache.load(path.stem)
        assert loaded is not None, path
        if path.stem == "shared":
            assert loaded.settings.seed in (1000, 1001)
        else:
            w, i = map(int, path.stem[1:].split("_"))
            expected = fake_result(10 * w + i)
            np.testing.assert_array_equal(loaded.sample_vectors, expected.sample_vectors)


def test_put_keeps_existing_notices(tmp_path):
    result = replace(fake_result(0), notices=("a sample of 64 of 67 tokens",))
    out = ResultCache(tmp_path, limit=0).put("k", result)
    assert out.notices[0] == "a sample of 64 of 67 tokens" and len(out.notices) == 2


def test_every_streamlit_cache_has_an_explicit_bound():
    """st.cache_data / st.cache_resource in app.py, ui/ and pages/ all pass max_entries or ttl."""
    import ast

    root = Path(__file__).resolve().parents[4]
    files = [root / "app.py", *sorted((root / "ui").glob("*.py")), *(root / "pages").glob("*.py")]
    unbounded = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for deco in node.decorator_list:
                call = deco if isinstance(deco, ast.Call) else None
                target = call.func if call else deco
                if isinstance(target, ast.Attribute) and target.attr in (
                    "cache_data",
                    "cache_resource",
                ):
                    keywords = {k.arg for k in call.keywords} if call else set()
                    if not keywords & {"max_entries", "ttl"}:
                        unbounded.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not unbounded, f"Streamlit caches without max_entries/ttl: {unbounded}"


def test_key_lock_does_not_block_without_a_writable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with ResultCache(blocker).key_lock("k"):  # root is a file: no lock folder, no lock, no error
        pass


def test_spilled_states_are_evicted_with_the_results_least_recently_used_first(tmp_path):
    cache = ResultCache(tmp_path)
    cache.save("k0", fake_result(0))
    size = cache.path("k0").stat().st_size
    spills = [cache.spill_path(f"r-state{i}") for i in range(3)]
    spills[0].parent.mkdir()
    for i, path in enumerate(spills):
        path.write_bytes(b"\0" * size)
        _age(path, 50 - i)  # state0 oldest
    _age(cache.path("k0"), 48.5)  # older than state2, newer than state0 and state1
    writing = spills[0].with_name("r-state9.f32.part123")  # a second pass writing right now
    writing.write_bytes(b"\0" * size)
    touch(spills[0])  # read again: now the newest
    usage = cache.usage()
    assert (usage.spill_count, usage.spill_bytes, usage.temp_bytes) == (3, 3 * size, size)
    assert "3 spilled states" in usage.summary()
    removed = ResultCache(tmp_path, limit=int(2.5 * size)).enforce_limit()
    assert sorted(p.name for p in removed) == ["k0.npz", "r-state1.f32"]
    assert spills[0].exists() and spills[2].exists() and writing.exists()
    count, _ = cache.clear()
    assert count == 2 and not spills[0].exists() and writing.exists()
