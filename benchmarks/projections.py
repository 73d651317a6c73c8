"""Benchmark: time to first projection (PCA, UMAP cold / warm, t-SNE) at 5k and 20k points, and the
dashboard's warm rerun after changing only the colour option. Prints JSON to stdout.

    .venv/bin/python benchmarks/projections.py [--sizes 5000 20000] [--no-tsne-large] [--no-app]
        [--no-umap]

t-SNE is openTSNE (Barnes-Hut below 10k points, FFT above); ``tsne_cpu_s`` is the process CPU
time of the fit (a figure that a busy shared machine inflates less than the wall time).

Points: a seeded synthetic cloud shaped like MiniLM hidden states (d = 384, 20 Gaussian clusters
plus one rogue dimension with a large mean), the same for every method. "UMAP cold" runs in a fresh
Python process and includes importing umap and numba's compilation; "UMAP warm" runs in this
process after :func:`isoscope.analysis.projections.methods.warm_up_umap`. The rerun timing uses Streamlit's AppTest on
the real page with the bundled model and corpus (after a first run has filled the caches).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def cloud(n: int, d: int = 384, clusters: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(clusters, d))
    x = centres[rng.integers(0, clusters, size=n)] + rng.normal(size=(n, d))
    x[:, 223] -= 30.0  # a rogue dimension, as in MiniLM's middle layers
    return x.astype(np.float32)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return round(time.perf_counter() - started, 2)


COLD_SNIPPET = """
import sys, time
started = time.perf_counter()
sys.path.insert(0, {root!r})
from benchmarks.projections import cloud
from isoscope.analysis.projections.methods import project
x = cloud({n})
t0 = time.perf_counter()
project(x, "umap", seed=0)
print(time.perf_counter() - started, time.perf_counter() - t0)
"""


def umap_cold(n: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", COLD_SNIPPET.format(root=str(ROOT), n=n)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    total, fit = map(float, out.stdout.split())
    return {"total_s_incl_import": round(total, 2), "fit_s": round(fit, 2)}


def app_rerun(repeats: int = 4) -> dict:
    os.environ["ISOSCOPE_UMAP_WARMUP"] = "0"
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    at.run()
    first = timed(lambda: at.switch_page("pages/projections.py").run())
    assert not at.exception, [e.value for e in at.exception]
    colours = ["token", "position", "text", "frequency", "category"]
    changes = []
    for i in range(repeats):
        for colour in colours:
            changes.append(
                timed(
                    lambda c=colour: at.selectbox(key="proj_colour_token sample").set_value(c).run()
                )
            )
        if i == 0:
            first_pass = list(changes)
    assert not at.exception
    plain = [timed(at.run) for _ in range(3)]
    return {
        "page_first_run_s": first,  # includes the extraction, or its load from the disk cache
        "colour_change_first_time_each_s": first_pass,
        "colour_change_median_s": round(statistics.median(changes), 3),
        "colour_change_max_s": round(max(changes), 3),
        "plain_rerun_median_s": round(statistics.median(plain), 3),
        "points": int(at.number_input(key="proj_size_token sample").value),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--no-tsne-large", action="store_true", help="skip t-SNE above 5000 points")
    parser.add_argument("--no-tsne", action="store_true", help="skip t-SNE entirely")
    parser.add_argument("--no-app", action="store_true", help="skip the AppTest rerun timing")
    parser.add_argument("--no-umap", action="store_true", help="skip UMAP (cold and warm)")
    args = parser.parse_args()

    from isoscope.analysis.projections.methods import project, warm_up_umap

    report: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1min_at_start": round(os.getloadavg()[0], 2),
        },
        "points": "synthetic, d=384, 20 clusters + 1 rogue dim; UMAP/t-SNE run on a 50-dim PCA first",
    }
    results: dict = {}
    for n in args.sizes:
        results[str(n)] = {} if args.no_umap else {"umap_cold": umap_cold(n)}
        print(f"umap cold {n}: {results[str(n)].get('umap_cold')}", file=sys.stderr)
    if not args.no_umap:
        report["umap_warmup_s"] = round(warm_up_umap(), 2)
    for n in args.sizes:
        x = cloud(n)
        row = results[str(n)]
        row["pca_s"] = timed(lambda x=x: project(x, "pca"))
        if not args.no_umap:
            row["umap_warm_s"] = timed(lambda x=x: project(x, "umap"))
        if not args.no_tsne and (n <= 5000 or not args.no_tsne_large):
            cpu = time.process_time()
            row["tsne_s"] = timed(lambda x=x: project(x, "tsne"))
            row["tsne_cpu_s"] = round(time.process_time() - cpu, 2)  # all threads of the process
        print(f"{n}: {row}", file=sys.stderr)
    report["time_to_first_projection"] = results
    if not args.no_app:
        report["dashboard_rerun_after_colour_change"] = app_rerun()
    report["machine"]["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
