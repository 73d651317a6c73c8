"""backend.engine.store.cache: size parsing, LRU eviction under a limit, temp files and model folders left alone,
one notice when nothing is kept, corrupted entries recomputed, two processes sharing a folder."""

from __future__ import annotations

import errno
import multiprocessing
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from backend.engine.errors import InputError
from backend.engine.extraction import ExtractionResult, ExtractionSettings, TokenTable
from backend.engine.store import cache as cache_mod
from backend.engine.store.cache import (
    DEFAULT_CACHE_LIMIT,
    ResultCache,
    cached_extract,
    default_cache_limit,
    format_usage,
    parse_size,
    set_process_limit,
)

MIB = 1024**2


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


@pytest.fixture(autouse=True)
def _no_process_limit(monkeypatch):
    monkeypatch.delenv("ISOSCOPE_CACHE_LIMIT", raising=False)
    set_process_limit(None)
    yield
    set_process_limit(None)


def _age(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


# ----------------------------------------------------------------------------- sizes and limits


@pytest.mark.parametrize(
    "text, expected",
    [
        ("500M", 500 * MIB),
        ("5G", 5 * 1024**3),
        ("5GiB", 5 * 1024**3),
        ("1.5g", int(1.5 * 1024**3)),
        ("800MB", 800 * MIB),
        ("64k", 64 * 1024),
        ("1T", 1024**4),
        ("12345", 12345),
        (" 0 ", 0),
        (7, 7),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "5X", "-1G", "1..5G", "G5"])
def test_parse_size_rejects_with_an_example(text):
    with pytest.raises(InputError, match="such as 500M or 5G"):
        parse_size(text)


def test_format_usage_in_the_limit_unit():
    assert format_usage(int(1.2 * 1024**3), 5 * 1024**3) == "1.2 of 5 GiB"
    assert format_usage(3 * MIB, 64 * MIB) == "3 of 64 MiB"
    assert format_usage(0, 5 * 1024**3) == "0 of 5 GiB"
    assert format_usage(40 * MIB, 5 * 1024**3) == "40 MiB of 5 GiB"


def test_limit_precedence(monkeypatch, tmp_path):
    assert default_cache_limit() == DEFAULT_CACHE_LIMIT == 5 * 1024**3
    monkeypatch.setenv("ISOSCOPE_CACHE_LIMIT", "2G")
    assert ResultCache(tmp_path).limit == 2 * 1024**3
    set_process_limit("300M")  # the sidebar / --cache-limit beats the env var
    assert ResultCache(tmp_path).limit == 300 * MIB
    assert ResultCache(tmp_path, limit="1M").limit == MIB  # an explicit limit beats both
    monkeypatch.setenv("ISOSCOPE_CACHE_LIMIT", "lots")
    set_process_limit(None)
    with pytest.raises(InputError, match="ISOSCOPE_CACHE_LIMIT"):
        default_cache_limit()
    with pytest.raises(InputError, match="ISOSCOPE_CACHE_LIMIT"):
        ResultCache(tmp_path)  # before any work, not after the extraction
    assert ResultCache(tmp_path, limit="1G").limit == 1024**3  # an explicit limit needs no env


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


def test_unwritable_folder_runs_with_one_notice(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = ResultCache(blocker / "cache")  # works as root too, unlike chmod
    calls = []

    def fake_extract(loaded, corpus, settings, progress):
        calls.append(1)
        return fake_result(0)

    loaded = type("L", (), {"fingerprint": "fp"})()
    corpus = type("C", (), {"sha": "s", "__len__": lambda self: 1})()
    import backend.engine.extraction

    monkeypatch.setattr(backend.engine.extraction, "extract", fake_extract)
    out = cached_extract(loaded, corpus, ExtractionSettings(), cache=cache)
    assert calls == [1]
    assert [n for n in out.notices if "nothing was cached" in n] == [out.notices[-1]]
    assert "cannot be written" in out.notices[-1] or "not writable" in out.notices[-1]
    assert ResultCache(tmp_path / "absent").usage().total == 0  # no folder: empty, no error


def test_full_disk_keeps_nothing_and_leaves_no_temp(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_mod.np, "savez", full)
    out = ResultCache(tmp_path).put("k", fake_result(0))
    assert "disk holding it is full" in out.notices[-1]
    assert not list(tmp_path.iterdir())


def test_corrupted_entry_is_recomputed_and_replaced(tmp_path, monkeypatch):
    import backend.engine.extraction

    cache = ResultCache(tmp_path)
    loaded = type("L", (), {"fingerprint": "fp"})()
    corpus = type("C", (), {"sha": "s", "__len__": lambda self: 1})()
    settings = ExtractionSettings()
    key = cache_mod.cache_key("fp", "s", settings)
    cache.path(key).write_bytes(b"PK\x03\x04 truncated garbage")
    monkeypatch.setattr(backend.engine.extraction, "extract", lambda *a: fake_result(5))
    out = cached_extract(loaded, corpus, settings, cache=cache)
    assert out.notices == ()
    np.testing.assert_array_equal(cache.load(key).sample_vectors, fake_result(5).sample_vectors)


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


def test_a_second_process_computing_the_same_key_waits_and_reads_the_first_result(
    tmp_path, monkeypatch
):
    """The key lock: while one caller (another process, here another cache object on the same
    folder in another thread) extracts a key, a second caller waits and then reads it from disk."""
    import threading

    import backend.engine.extraction

    calls: list[int] = []
    started = threading.Event()

    def slow_extract(*args):
        calls.append(1)
        started.set()
        time.sleep(0.5)
        return fake_result(7)

    monkeypatch.setattr(backend.engine.extraction, "extract", slow_extract)
    card = {"source": "fake"}  # the card fake_result carries: the same path, so no reuse line
    loaded = type("L", (), {"fingerprint": "fp", "info": type("I", (), {"to_dict": card.copy})})()
    corpus = type("C", (), {"sha": "s", "__len__": lambda self: 1})()
    out: dict[str, ExtractionResult] = {}
    first = threading.Thread(
        target=lambda: out.__setitem__(
            "a", cached_extract(loaded, corpus, cache=ResultCache(tmp_path))
        )
    )
    first.start()
    assert started.wait(10)
    out["b"] = cached_extract(loaded, corpus, cache=ResultCache(tmp_path))
    first.join(10)
    assert len(calls) == 1
    np.testing.assert_array_equal(out["a"].sample_vectors, out["b"].sample_vectors)
    assert out["b"].model == card  # read from the cache: the card names the same path, unchanged


def test_key_lock_does_not_block_without_a_writable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with ResultCache(blocker).key_lock("k"):  # root is a file: no lock folder, no lock, no error
        pass


def test_spilled_states_are_evicted_with_the_results_least_recently_used_first(tmp_path):
    from backend.engine.store.cache import touch

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
