"""Benchmark: every token of one MiniLM state in the projection view (issue 35). Prints JSON.

    .venv/bin/python benchmarks/million.py [--tokens 1000000] [--state 3] [--landmarks 10000]
        [--no-umap] [--no-browser]

Corpus: generated, not repeated: texts of 12-60 words drawn (seeded) from the words of the
bundled corpus, until the texts hold about ``--tokens`` MiniLM tokens (repeating the bundled
texts would give UMAP exact duplicates). Model: the bundled all-MiniLM-L6-v2 on the CPU.

Measured, once each (the machine may be shared: say so when you quote a number):

- ``extract_s``: the ordinary extraction (statistics and the token sample); ``spill_s``: the
  second pass writing the chosen state of every token to disk; their sum is "extraction to
  projection-ready".
- ``pca_s``: exact streaming PCA of every token, raw and clipped (the state's outlier dims);
  ``umap_s``: landmark UMAP (fit on ``--landmarks`` tokens, every other one transformed), raw and
  clipped, including numba's compilation on the first fit.
- ``peak_rss_mib`` and ``model_rss_mib`` (the process after loading the model): the target is
  peak minus model <= 2 GiB.
- Browser (Debian's Chromium, headless, software WebGL: ``--disable-gpu``): the points file is
  served by ``tests/browser/atlas_app.py`` and drawn by the atlas frame; ``first_frame_s`` is
  from the fetched data being parsed to the first drawn frame, ``fetch_to_frame_s`` from the
  fetch's start; ``pan_draw_ms`` the median draw time of 60 pan/zoom frames (the frame's own
  "atlas-frame" performance measures) and ``pan_fps`` the frames per second from the median
  interval between those animation frames.

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
from backend.engine.environment import use_offline_environment  # noqa: E402

use_offline_environment()


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generated_corpus(loaded, tokens: int, seed: int = 0):
    """Texts of random bundled-corpus words holding about ``tokens`` tokens (module doc)."""
    from backend.engine.corpus import Corpus, bundled_corpus

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


def browser_times(payload: Path, folder: Path) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.browser.test_atlas import CHROMIUM, CHROMIUM_ARGS, open_atlas, serve_atlas

    proc, base = serve_atlas(folder, ISOSCOPE_ATLAS_PAYLOAD=str(payload))
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page, frame, _ = open_atlas(chromium, base, timeout_s=600)
            times = frame.evaluate("() => atlas.times")
            pan = frame.evaluate("() => atlas.pan(60)")
            chromium.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    interval = statistics.median(pan["interval_ms"]) if pan["interval_ms"] else float("nan")
    return {
        "first_frame_s": round((times["firstFrame"] - times["dataReady"]) / 1000, 2),
        "fetch_to_frame_s": round((times["firstFrame"] - times["fetchStart"]) / 1000, 2),
        "pan_draw_ms": round(statistics.median(pan["draw_ms"]), 1) if pan["draw_ms"] else None,
        "pan_fps": round(1000 / interval, 1) if interval == interval else None,
        "pan_frames": len(pan["draw_ms"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--state", type=int, default=3)
    parser.add_argument("--landmarks", type=int, default=10_000)
    parser.add_argument("--no-umap", action="store_true")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()

    from backend.analysis.geometry.corpus_projection import corpus_before_after
    from backend.analysis.geometry.outliers import auto_clip_dims
    from backend.analysis.geometry.projections import text_snippets, token_colouring
    from backend.engine.extraction import extract
    from backend.engine.extraction.spill import spill_state
    from backend.engine.models import load_model
    from backend.plots.atlas import encode_points

    loaded = load_model("default", device="cpu")
    model_rss = rss_mib()
    corpus = generated_corpus(loaded, args.tokens)
    out: dict = {
        "benchmark": "million",
        "corpus": corpus.name,
        "texts": len(corpus.texts),
        "state": args.state,
        "machine": platform.processor() or platform.machine(),
        "runs": 1,
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
        (before, after), out["pca_s"] = timed(
            lambda: corpus_before_after(spilled, fit, "pca", "clip", post)
        )
        if not args.no_umap:
            _, out["umap_s"] = timed(
                lambda: corpus_before_after(
                    spilled, fit, "umap", "clip", post, landmarks=args.landmarks
                )
            )
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
            out |= browser_times(path, folder)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
