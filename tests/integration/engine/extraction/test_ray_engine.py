"""The Ray engine equals the single-process engine: statistics to float64 rounding, the token
sample bit for bit, on uneven Parquet shards, with 2 workers, and after a worker is killed.

Each Ray test starts and stops its own local instance (``ray.init(num_cpus=2)``, ~15-30 s here);
the planning and merge tests (test_ray_plan.py, test_ray_pool.py) need no Ray at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from isoscope.analysis.anisotropy import by_state
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings, extract
from isoscope.engine.extraction.ray_cluster import ModelSpec, RayEngineError, RayOptions
from isoscope.engine.extraction.ray_engine import run_ray_extraction
from isoscope.engine.inputs.corpus import bundled_corpus, load_corpus_file
from isoscope.engine.load.models import load_model

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[4]
# small token budget: many batches of different widths, so chunking matters
SETTINGS = ExtractionSettings(max_length=32, batch_size=8, token_budget=160, sample_size=300)
STATS = ("mean", "variance", "min", "max", "mean_abs")


def assert_same_result(got: ExtractionResult, want: ExtractionResult) -> None:
    for name in STATS:
        np.testing.assert_allclose(
            getattr(got, name), getattr(want, name), rtol=1e-12, atol=1e-13, err_msg=name
        )
    for name in ("argmin_count", "argmax_count", "sample_index", "sample_vectors"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    for column in ("text_id", "position", "token", "word_id", "is_special", "is_punct"):
        np.testing.assert_array_equal(getattr(got.tokens, column), getattr(want.tokens, column))
    assert (got.texts, got.corpus_sha, got.notices) == (want.texts, want.corpus_sha, want.notices)
    assert got.model_fingerprint == want.model_fingerprint
    a, b = by_state(got, n_pairs=2000), by_state(want, n_pairs=2000)
    np.testing.assert_array_equal(a.anisotropy, b.anisotropy)
    np.testing.assert_array_equal(a.isoscore, b.isoscore)


@pytest.fixture
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


# ----------------------------------------------------------------------------- on Ray


def test_two_ray_workers_on_uneven_parquet_shards_equal_one_process(
    tiny_bert_dir, uneven_shards, ray_local
):
    want = extract(
        load_model(str(tiny_bert_dir), device="cpu"), load_corpus_file(uneven_shards), SETTINGS
    )
    seen: list[tuple[int, int]] = []
    got = run_ray_extraction(
        ModelSpec(str(tiny_bert_dir)),
        uneven_shards,  # read as a Ray dataset
        SETTINGS,
        RayOptions(address=None, workers=2),
        progress=lambda done, total: seen.append((done, total)),
    )
    assert_same_result(got, want)
    assert got.extra["engine"]["workers"] == 2
    assert seen[-1] == (100, 100) and len(seen) > 2
    with pytest.raises(RayEngineError, match="--workers 5 needs more CPUs"):
        run_ray_extraction(
            ModelSpec(str(tiny_bert_dir)),
            uneven_shards,
            SETTINGS,
            RayOptions(address=None, workers=5),
        )
    assert ray.is_initialized()  # a connection we did not open stays open


def _map_workers() -> list:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if "MapWorker(MapBatches(ExtractWorker))" in cmd:
            found.append(proc)
    return found


def test_a_worker_killed_mid_run_is_retried_and_the_result_stays_exact(
    tiny_bert_dir, uneven_shards, ray_local
):
    want = extract(
        load_model(str(tiny_bert_dir), device="cpu"), load_corpus_file(uneven_shards), SETTINGS
    )
    first_part = threading.Event()
    out: dict = {}

    def run():
        try:
            out["result"] = run_ray_extraction(
                ModelSpec(str(tiny_bert_dir)),
                uneven_shards,
                SETTINGS,
                RayOptions(address=None, workers=2),
                progress=lambda done, total: first_part.set() if 0 < done < total else None,
                batch_delay_s=1.5,  # keeps chunks in flight while we kill a worker
            )
        except BaseException as exc:  # reported below
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert first_part.wait(timeout=240), out.get("error")
    victims = _map_workers()
    assert victims, "no Ray worker process found"
    victims[0].kill()
    victims[0].wait(timeout=30)
    thread.join(timeout=300)
    assert not thread.is_alive()
    assert "error" not in out, out.get("error")
    assert not victims[0].is_running()
    assert_same_result(out["result"], want)


def test_cli_on_sharded_parquet_with_minilm_saves_the_single_process_result(
    tmp_path, minilm, run_analyze
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from isoscope.engine.store.saved import load_saved

    texts = bundled_corpus().texts[:24]
    shards = tmp_path / "minilm-shards"
    shards.mkdir()
    for i, (a, b) in enumerate([(0, 3), (3, 20), (20, 24)]):
        pq.write_table(pa.table({"text": texts[a:b]}), shards / f"part-{i:02d}.parquet")
    args = ("--max-length", "32", "--sample-size", "200", "--batch-size", "4")
    proc = run_analyze(
        *("--texts", str(shards), "--out", str(tmp_path / "ray.json"), *args),
        *("--engine", "ray", "--workers", "2", "--save", str(tmp_path / "run.isoscope")),
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert "engine: ray · 2 worker(s) on cpu" in proc.stderr
    settings = ExtractionSettings(max_length=32, sample_size=200, batch_size=4)
    # each worker runs torch on its one CPU; MiniLM's matmuls round differently on two threads
    # (about 1e-7), so the one-process reference runs on one thread too
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want = extract(minilm, load_corpus_file(shards), settings)
    finally:
        torch.set_num_threads(threads)
    got = load_saved(tmp_path / "run.isoscope")
    assert_same_result(got, want)
    report = json.loads((tmp_path / "ray.json").read_text())
    assert report["corpus"]["num_tokens"] == want.num_tokens


def test_ctrl_c_leaves_no_ray_process_behind(tmp_path, tiny_bert_dir):
    """SIGINT to the CLI (not its children) while workers run: exit 130, every Ray process it
    started (GCS, raylet, workers) is gone."""
    big = tmp_path / "big.txt"
    texts = bundled_corpus().texts
    big.write_text("\n".join(f"{i} {t}" for i in range(40) for t in texts))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ISOSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "isoscope", "analyze", "--model", str(tiny_bert_dir)]
    cmd += [
        "--texts",
        str(big),
        "--out",
        str(tmp_path / "o.json"),
        "--engine",
        "ray",
        "--workers",
        "2",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        parent = psutil.Process(proc.pid)
        started: list = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            started = parent.children(recursive=True)
            if any("MapWorker" in " ".join(_cmdline(p)) for p in started):
                break
            time.sleep(0.3)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert any("raylet" in " ".join(_cmdline(p)) for p in started)
        os.kill(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1].endswith("error: interrupted")
    deadline = time.monotonic() + 30
    alive = started
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.3)
    assert not alive, [(p.pid, _cmdline(p)) for p in alive]


def _cmdline(proc) -> list[str]:
    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []
