"""Benchmark: every token of one MiniLM state in the projection view. Prints JSON.

    .venv/bin/python benchmarks/million.py [--tokens 1000000] [--state 3] [--landmarks 10000]
        [--repeats 3] [--no-umap] [--no-browser]

Corpus: generated, not repeated: texts of 12-60 words drawn (seeded) from the words of the
bundled corpus, until the texts hold about ``--tokens`` MiniLM tokens (repeating the bundled
texts would give UMAP exact duplicates). Model: the bundled all-MiniLM-L6-v2 on the CPU.

One extraction and one spill, then ``--repeats`` runs of each projection and browser figure,
reported as ``{"median", "min", "max", "runs"}`` (``single_runs`` lists the figures measured
once). The machine may be shared: say so when you quote a number.

- ``extract_s``: the ordinary extraction (statistics and the token sample); ``spill_s``: the
  second pass writing the chosen state of every token to disk; their sum is "extraction to
  projection-ready". Single runs.
- ``pca_s``: exact streaming PCA of every token, raw and clipped (the state's outlier dims).
- ``umap_s``: landmark UMAP of raw and clipped (fit on ``--landmarks`` tokens, every other one
  placed by kNN among them), split into ``umap_fit_s`` and ``umap_placement_s``; the first run
  includes numba's compilation (``umap_first_run_s``).
- ``peak_rss_mib`` and ``model_rss_mib`` (this process after loading the model; the browser and
  its server are other processes): the target is peak minus model <= 2 GiB. Single runs.
- Browser (Debian's Chromium, headless, software WebGL: ``--disable-gpu``): the points file is
  served by ``tests/browser/atlas_app.py`` and drawn by the atlas frame, once per repeat in a new
  page. ``first_frame_s``: from the fetched data parsed to the first drawn frame
  (``fetch_to_frame_s`` from the fetch's start). Pan/zoom: a scripted pan of 60 animation frames
  as a gesture does it (the drawn frame moved by a CSS transform, every point redrawn when it
  settles): ``pan_fps`` from the median interval between requestAnimationFrame timestamps, and
  ``settle_draw_ms`` the one full redraw after it (the "atlas-frame" performance measure); and
  the same pan redrawing every point each frame (``redraw_pan_fps``, ``redraw_draw_ms``), which
  is what software WebGL cannot do at 30 frames/s.

Targets on the reference machine: peak RSS <= 2 GiB above the model; PCA of 1M <= 60 s; first
frame <= 5 s after the data is ready; pan/zoom >= 30 frames/s.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402

use_offline_environment()


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generated_corpus(loaded, tokens: int, seed: int = 0):
    """Texts of random bundled-corpus words holding about ``tokens`` tokens (module doc)."""
    from isoscope.engine.inputs.corpus import Corpus, bundled_corpus

    words = " ".join(bundled_corpus().texts).split()
    rng = np.random.default_rng(seed)
    probe = [" ".join(rng.choice(words, 36)) for _ in range(200)]
    per_text = np.mean([len(loaded.tokenizer(t)["input_ids"]) for t in probe])
    count = int(np.ceil(tokens / per_text))
    texts = tuple(" ".join(rng.choice(words, int(rng.integers(12, 61)))) for _ in range(count))
    return Corpus(texts, f"generated ({count:,} texts of bundled-corpus words)")


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - started, 2)


def spread(values: list[float], digits: int = 2) -> dict:
    """Median and [min, max] of repeated measurements."""
    values = [float(v) for v in values]
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "runs": len(values),
    }


def fps(intervals_ms: list[float]) -> float:
    return round(1000 / statistics.median(intervals_ms), 1) if intervals_ms else float("nan")


def browser_times(payload: Path, folder: Path, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser.test_atlas import CHROMIUM, CHROMIUM_ARGS, open_atlas, serve_atlas

    runs: dict[str, list[float]] = {}
    proc, base = serve_atlas(folder, ISOSCOPE_ATLAS_PAYLOAD=str(payload))
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(repeats):
                page, frame, _ = open_atlas(chromium, base, timeout_s=600)
                times = frame.evaluate("() => atlas.times")
                moved = frame.evaluate("() => atlas.pan(60)")
                redrawn = frame.evaluate("() => atlas.pan(20, 'redraw')")
                page.close()
                figures = {
                    "first_frame_s": (times["firstFrame"] - times["dataReady"]) / 1000,
                    "fetch_to_frame_s": (times["firstFrame"] - times["fetchStart"]) / 1000,
                    "pan_fps": fps(moved["interval_ms"]),
                    "settle_draw_ms": max(moved["draw_ms"], default=float("nan")),
                    "redraw_pan_fps": fps(redrawn["interval_ms"]),
                    "redraw_draw_ms": statistics.median(redrawn["draw_ms"]),
                }
                for name, value in figures.items():
                    runs.setdefault(name, []).append(value)
            chromium.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    out = {name: spread(values) for name, values in runs.items()}
    out["pan_frames"] = 60
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--state", type=int, default=3)
    parser.add_argument("--landmarks", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-umap", action="store_true")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()

    from isoscope.analysis.outliers import auto_clip_dims
    from isoscope.analysis.projections.all_tokens import corpus_before_after
    from isoscope.analysis.projections.methods import text_snippets, token_colouring
    from isoscope.engine.extraction import extract
    from isoscope.engine.extraction.spill import spill_state
    from isoscope.engine.load.models import load_model
    from isoscope.plots.atlas import encode_points

    loaded = load_model("default", device="cpu")
    model_rss = rss_mib()
    corpus = generated_corpus(loaded, args.tokens)
    out: dict = {
        "benchmark": "million",
        "corpus": corpus.name,
        "texts": len(corpus.texts),
        "state": args.state,
        "machine": platform.processor() or platform.machine(),
        "repeats": args.repeats,
        "single_runs": [
            "extract_s",
            "spill_s",
            "projection_ready_s",
            "encode_s",
            "peak_rss_mib",
            "model_rss_mib",
        ],
    }
    result, out["extract_s"] = timed(lambda: extract(loaded, corpus))
    out["tokens"] = result.num_tokens
    with tempfile.TemporaryDirectory(prefix="isoscope-million-") as tmp:
        folder = Path(tmp)
        spilled, out["spill_s"] = timed(
            lambda: spill_state(loaded, result, args.state, folder / "state.f32")
        )
        out["projection_ready_s"] = round(out["extract_s"] + out["spill_s"], 2)
        dims = auto_clip_dims(result)[args.state]
        out["clip_dims"] = dims
        fit = result.sample_vectors[args.state]
        post = {"dims": dims}
        pca = [
            timed(lambda: corpus_before_after(spilled, fit, "pca", "clip", post))
            for _ in range(args.repeats)
        ]
        before, after = pca[0][0]
        out["pca_s"] = spread([s for _, s in pca])
        if not args.no_umap:
            umap = [
                timed(
                    lambda: corpus_before_after(
                        spilled, fit, "umap", "clip", post, landmarks=args.landmarks
                    )
                )
                for _ in range(args.repeats)
            ]
            out["umap_s"] = spread([s for _, s in umap])
            out["umap_first_run_s"] = umap[0][1]
            out["umap_fit_s"] = spread([p[0].fit_seconds for p, _ in umap])
            out["umap_placement_s"] = spread([p[0].seconds - p[0].fit_seconds for p, _ in umap])
            out["landmarks"] = args.landmarks
        tokens = result.tokens
        colourings = {
            by: token_colouring(tokens, tokens, by)
            for by in ("category", "position", "token", "text", "frequency")
        }
        payload, out["encode_s"] = timed(
            lambda: encode_points(
                before, after, colourings, tokens, text_snippets(result.texts, 100)
            )
        )
        out["payload_mib"] = round(len(payload) / 2**20, 1)
        out["model_rss_mib"] = round(model_rss, 1)
        out["peak_rss_mib"] = round(rss_mib(), 1)
        out["peak_above_model_mib"] = round(out["peak_rss_mib"] - model_rss, 1)
        if not args.no_browser:
            path = folder / "points.bin"
            path.write_bytes(payload)
            del payload
            out |= browser_times(path, folder, args.repeats)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
