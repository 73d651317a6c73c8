"""The Ray engine against the local engine: wall time for N texts, 1 worker vs 2 (or more).

Prints one JSON object with, per variant, the runs' seconds, their median and spread (max - min):
- ``local``: ``isoscope.engine.extraction.extract`` in this process (torch's default threads);
- ``ray_wN``: ``isoscope.engine.extraction.ray_engine.run_ray_extraction`` with N CPU workers (one torch thread
  each) on a private local Ray instance started and stopped by the run: ``total_s`` counts
  everything (Ray start, reading the corpus as a Ray dataset, planning, actor start-up and model
  loads, the extraction, the merge); ``pool_s`` only the actor-pool stage (actor start-up included).
Every Ray result is checked against the local one (max |diff| of the mean, sample identical).

Usage: ``python benchmarks/ray_engine.py [--texts 2000] [--model default] [--workers 1,2]
[--runs 3] [--local-runs N] [--max-length 128]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def summary(values: list[float]) -> dict:
    return {
        "runs": [round(v, 2) for v in values],
        "median": round(statistics.median(values), 2),
        "spread": round(max(values) - min(values), 2),
    }


def main() -> None:
    import numpy as np
    from extract import make_texts  # benchmarks/extract.py: the same varied-length texts

    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.extraction.ray_cluster import ModelSpec, RayOptions
    from isoscope.engine.extraction.ray_engine import run_ray_extraction
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.load.models import load_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--model", default="default")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--local-runs", type=int, default=None, help="runs of the local engine (default --runs)"
    )
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="isoscope-ray-bench-"))
    path = folder / "texts.txt"
    path.write_text("\n".join(make_texts(args.texts)) + "\n")
    corpus = load_corpus_file(path)
    settings = ExtractionSettings(max_length=args.max_length)
    loaded = load_model(args.model, device="cpu")
    out: dict = {
        "model": loaded.info.display_name,
        "texts": len(corpus),
        "cpus": os.cpu_count(),
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
        "settings": settings.to_dict(),
    }
    local_times = []
    for _ in range(args.runs if args.local_runs is None else max(1, args.local_runs)):
        started = time.perf_counter()
        want = extract(loaded, corpus, settings)
        local_times.append(time.perf_counter() - started)
    out["tokens"] = want.num_tokens
    out["local"] = summary(local_times)
    del loaded

    for workers in (int(w) for w in args.workers.split(",")):
        totals, pools, diffs, same = [], [], [], []
        for _ in range(args.runs):
            marks: list[float] = []

            def progress(done: int, total: int, marks=marks) -> None:
                marks.append(time.perf_counter())

            started = time.perf_counter()
            got = run_ray_extraction(
                ModelSpec(args.model),
                path,
                settings,
                RayOptions(address="local", workers=workers, num_cpus=os.cpu_count()),
                progress,
            )
            totals.append(time.perf_counter() - started)
            pools.append(marks[-1] - marks[0])
            diffs.append(float(np.abs(got.mean - want.mean).max()))
            same.append(
                bool(
                    np.array_equal(got.sample_index, want.sample_index)
                    and np.array_equal(got.sample_vectors, want.sample_vectors)
                )
            )
        out[f"ray_w{workers}"] = {
            "total_s": summary(totals),
            "pool_s": summary(pools),
            "max_abs_mean_diff": max(diffs),
            "sample_identical": all(same),
        }
    out["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
