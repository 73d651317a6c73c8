"""The bounded extraction cache end to end: `isoscope cache`, `analyze --cache-limit`, one
notice when nothing is kept, and a small soak (a few-MiB limit evicts the oldest results and a later
request recomputes them to the same arrays)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.inputs.corpus import corpus_from_text
from isoscope.engine.store.cache import ResultCache
from isoscope.engine.store.cached_extract import cached_extract
from isoscope.engine.store.entries import cache_key
from isoscope.engine.store.limit import set_process_limit

ROOT = Path(__file__).resolve().parents[3]
MIB = 1024**2


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cache-cli") / "texts.txt"
    path.write_text(
        "\n".join(f"Sentence number {i} talks about the river bank." for i in range(12)) + "\n"
    )
    return path


def run_cache(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ISOSCOPE_CACHE_DIR": str(cache_dir)}
    env.pop("ISOSCOPE_CACHE_LIMIT", None)
    return subprocess.run(
        [sys.executable, "-m", "isoscope", "cache", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def analyze_args(model: Path, texts: Path, out: Path) -> list[str]:
    return ["--model", str(model), "--texts", str(texts), "--out", str(out), "--device", "cpu"]


def test_info_and_clear(run_analyze, tiny_bert_dir, texts_file, tmp_path):
    cache_dir = tmp_path / "cache"
    proc = run_analyze(
        *analyze_args(tiny_bert_dir, texts_file, tmp_path / "a.json"), cache_dir=cache_dir
    )
    assert proc.returncode == 0, proc.stderr
    assert "nothing was cached" not in proc.stderr
    info = run_cache("--info", "--out", str(tmp_path / "info.json"), cache_dir=cache_dir)
    assert info.returncode == 0, info.stderr
    payload = json.loads((tmp_path / "info.json").read_text())
    assert payload["results_count"] == 1 and payload["limit_bytes"] == 5 * 1024**3
    on_disk = sum(p.stat().st_size for p in cache_dir.glob("*.npz"))
    assert payload["results_bytes"] == on_disk > 0
    # beside the results, only the device's small records (speeds.json: the load's phases)
    others = sum(p.stat().st_size for p in cache_dir.glob("*.json"))
    assert payload["total_bytes"] == on_disk + others and others < 4096
    assert " of 5 GiB (results " in info.stderr

    cleared = run_cache("--clear", cache_dir=cache_dir)
    assert cleared.returncode == 0, cleared.stderr
    assert "cleared 1 entries" in cleared.stderr
    assert not list(cache_dir.glob("*.npz"))
    assert run_cache("--info", cache_dir=cache_dir).stderr.count("0 of 5 GiB") == 1


def test_bad_limit_and_flags_exit_2_with_one_line(tmp_path, run_analyze, texts_file):
    proc = run_cache("--info", "--cache-limit", "5 gigs", cache_dir=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "such as 500M or 5G" in proc.stderr
    proc = run_cache("--info", "--models", cache_dir=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    proc = run_analyze(
        "--texts", str(texts_file), "--out", str(tmp_path / "o.json"), "--cache-limit", "lots",
        cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: --cache-limit 'lots' is not a size")


def test_limit_below_one_result_runs_with_one_notice(
    run_analyze, tiny_bert_dir, texts_file, tmp_path
):
    cache_dir = tmp_path / "cache"
    out = tmp_path / "small.json"
    args = analyze_args(tiny_bert_dir, texts_file, out)
    proc = run_analyze(*args, "--cache-limit", "4K", cache_dir=cache_dir)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("nothing was cached") == 1
    assert "4 KiB" in proc.stderr
    assert not list(cache_dir.glob("*.npz"))
    report = json.loads(out.read_text())
    assert len(report["layers"]) == 3  # computed and written as usual
    assert [n for n in report["corpus"]["notices"] if n.startswith("nothing was cached")]


def test_unwritable_cache_folder_runs_with_one_notice(
    run_analyze, tiny_bert_dir, texts_file, tmp_path
):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = tmp_path / "o.json"
    proc = run_analyze(*analyze_args(tiny_bert_dir, texts_file, out), cache_dir=blocker / "cache")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "nothing was cached" in line]
    assert len(lines) == 1 and "ISOSCOPE_CACHE_DIR" in lines[0]
    assert out.exists()


def test_small_soak_evicts_oldest_and_recomputes_them(tmp_path, monkeypatch):
    """Six distinct corpora through a 4 MiB cache: the oldest go, the newest stay, the disk stays
    under the limit, and asking again for the first recomputes the same arrays."""
    import isoscope.engine.extraction
    from isoscope.engine.load.models import load_model

    set_process_limit(None)
    loaded = load_model("random:bert:layers=2,width=64,heads=2,seed=0", device="cpu")
    settings = ExtractionSettings(max_length=32, sample_size=4000)
    corpora = [
        corpus_from_text(
            "\n".join(f"Corpus {c} line {i}: the bank by the river {i * c}." for i in range(120))
        )
        for c in range(6)
    ]
    cache = ResultCache(tmp_path, limit=4 * MIB)
    calls = []
    real_extract = isoscope.engine.extraction.extract

    def counting_extract(*args, **kwargs):
        calls.append(1)
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(isoscope.engine.extraction, "extract", counting_extract)
    first = [cached_extract(loaded, c, settings, cache=cache) for c in corpora]
    assert len(calls) == 6
    size = cache.path(cache_key(loaded.fingerprint, corpora[-1].sha, settings)).stat().st_size
    assert MIB < size < 2 * MIB  # so 2-3 entries fit in 4 MiB: the test is about eviction
    kept = [cache.path(cache_key(loaded.fingerprint, c.sha, settings)).exists() for c in corpora]
    assert kept[-1] and kept[-2] and not kept[0] and not kept[1]
    assert kept == sorted(kept)  # only a prefix (the oldest) was evicted
    assert cache.usage().total <= 4 * MIB
    assert all("nothing was cached" not in n for r in first for n in r.notices)

    again = cached_extract(loaded, corpora[0], settings, cache=cache)
    assert len(calls) == 7  # evicted: recomputed
    for name in ("mean", "variance", "sample_vectors", "sample_index", "argmax_count"):
        np.testing.assert_array_equal(getattr(again, name), getattr(first[0], name), err_msg=name)
    cached_extract(loaded, corpora[-1], settings, cache=cache)
    assert len(calls) == 7  # the newest is still a hit
    assert cache.usage().total <= 4 * MIB


def test_sample_budget_caps_the_sample_and_says_so(
    run_analyze, tiny_bert_dir, texts_file, tmp_path
):
    """3 states x width 32 x 4 bytes = 384 bytes per token: 4 KiB holds 10 tokens per state."""
    out = tmp_path / "o.json"
    args = analyze_args(tiny_bert_dir, texts_file, out)
    proc = run_analyze(*args, "--sample-budget", "4K", "--no-cache", cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("10 tokens per state to stay within 4 KiB") == 1
    report = json.loads(out.read_text())
    assert report["corpus"]["sample_size"] == 10
    assert report["settings"]["sample_budget_bytes"] == 4096
    bad = run_analyze(*args, "--sample-budget", "a lot", cache_dir=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "--sample-budget 'a lot' is not a size" in bad.stderr
