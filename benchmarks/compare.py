"""Time A vs B on the default model and its random-init copy on the bundled corpus (targets:
<= 20 s cold on 2 cores with two extractions, <= 1 s warm).

Each repeat runs in a fresh subprocess with an empty extraction cache and ``--threads`` threads:
- ``cold_s``: load both models, extract both (written to the disk cache), and
  :func:`isoscope.analysis.compare.comparison.compare` (CKA on every pair of hidden states, per-state figures, LayerNorm
  deltas), written to the disk cache as the page does; ``import_s`` (Python imports) is reported
  apart;
- ``warm_s``: the same again in that process: both extractions and the comparison from the disk
  cache (models already loaded: what the page does after a server restart, before the memo);
  ``recompute_s``: the comparison computed again, for reference;
- ``warm_memo_s``: the page's rerun path, the memoised comparison (a dictionary hit).
Also the breakdown (``load_s``, ``extract_a_s``, ``extract_b_s``, ``compare_s``, ``cka_s``,
``summarize_s``), the CPU seconds of the process (``*_cpu_s``: with ``--threads 1`` on a busy
machine, a better guess of the idle wall time than the wall time), the 1-minute load average at
the start of each repeat, and the CKA diagonal.

Usage: ``python benchmarks/compare.py [--repeats 3] [--threads 2]``. Prints one JSON object with
the median and the spread (min, max) of every time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run() -> dict:
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    from isoscope.engine.environment import use_offline_environment

    use_offline_environment()
    from isoscope.analysis.compare.comparison import (
        cka_matrix,
        compare,
        compare_with_cache,
        summarize,
    )
    from isoscope.engine.environment import quiet_libraries
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract

    quiet_libraries()
    out: dict = {"import_s": time.perf_counter() - started, "load_avg_1min": os.getloadavg()[0]}
    corpus, settings, cache = bundled_corpus(), ExtractionSettings(), ResultCache()

    t0, c0 = time.perf_counter(), time.process_time()
    a = load_model("default", device="cpu")
    b = load_model("random-like:default", device="cpu")
    t1 = time.perf_counter()
    ra = cached_extract(a, corpus, settings, cache=cache)
    t2 = time.perf_counter()
    rb = cached_extract(b, corpus, settings, cache=cache)
    t3 = time.perf_counter()
    c = compare_with_cache(cache, ra, rb, loaded_a=a, loaded_b=b)
    t4 = time.perf_counter()
    out.update(
        load_s=t1 - t0,
        extract_a_s=t2 - t1,
        extract_b_s=t3 - t2,
        compare_s=t4 - t3,
        cold_s=t4 - t0,
        cold_cpu_s=time.process_time() - c0,
    )

    t0, c0 = time.perf_counter(), time.process_time()
    ra2 = cached_extract(a, corpus, settings, cache=cache)
    rb2 = cached_extract(b, corpus, settings, cache=cache)
    compare_with_cache(cache, ra2, rb2, loaded_a=a, loaded_b=b)
    out["warm_s"] = time.perf_counter() - t0
    out["warm_cpu_s"] = time.process_time() - c0
    t0 = time.perf_counter()
    compare(ra2, rb2, loaded_a=a, loaded_b=b)
    out["recompute_s"] = time.perf_counter() - t0

    memo = {("compare", ra.model_fingerprint, rb.model_fingerprint): c}
    t0 = time.perf_counter()
    memo[("compare", ra.model_fingerprint, rb.model_fingerprint)]
    out["warm_memo_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    summarize(ra)
    summarize(rb)
    out["summarize_s"] = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    cka_matrix(list(ra.sample_vectors), list(rb.sample_vectors))
    out["cka_s"] = time.perf_counter() - t0
    out["cka_cpu_s"] = time.process_time() - c0
    out["tokens"] = int(ra.num_tokens)
    out["cka_diagonal"] = [round(float(v), 3) for v in c.cka.diagonal]
    out["basis"] = c.cka.basis
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run()))
        return
    runs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache_dir:
            env = {
                **os.environ,
                "ISOSCOPE_CACHE_DIR": cache_dir,
                "OMP_NUM_THREADS": str(args.threads),
                "MKL_NUM_THREADS": str(args.threads),
            }
            proc = subprocess.run(
                [sys.executable, __file__, "--one"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    keys = [k for k, v in runs[0].items() if k.endswith("_s")]
    summary = {
        k: {
            "median": round(statistics.median(r[k] for r in runs), 3),
            "min": round(min(r[k] for r in runs), 3),
            "max": round(max(r[k] for r in runs), 3),
        }
        for k in keys
    }
    print(
        json.dumps(
            {
                "benchmark": "compare default vs random-like:default, bundled corpus",
                "threads": args.threads,
                "repeats": args.repeats,
                "tokens": runs[0]["tokens"],
                "basis": runs[0]["basis"],
                "cka_diagonal": runs[0]["cka_diagonal"],
                "load_avg_1min": [round(r["load_avg_1min"], 2) for r in runs],
                **summary,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
