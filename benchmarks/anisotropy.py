"""Time the isotropy metrics on the bundled MiniLM and the bundled corpus.

Prints one JSON object:
- ``analyze_report_s``: :func:`isoscope.commands.analyze.build_report` now (with IsoScore, clipped
  anisotropy, histograms and Timkey's top dims) and ``analyze_report_before_s``: the same report's
  former content only (anisotropy + outlier criteria), so ``added_s`` is what the other metrics add.
- ``by_state_s``: :func:`isoscope.analysis.anisotropy.by_state` raw (with self-/intra-text similarity) and
  with each post-processing of the registry (what the Anisotropy page computes once, then memoises).
- ``minilm``: the measured per-state numbers (anisotropy raw vs clipped, IsoScore).

Usage: ``python benchmarks/anisotropy.py [--repeats 3] [--sample-size 8000]``. Times are medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample-size", type=int, default=8000)
    args = parser.parse_args()

    from isoscope.analysis.anisotropy import anisotropy_by_state, by_state
    from isoscope.analysis.outliers import outlier_dims, outliers_by_criterion
    from isoscope.analysis.projections.postprocess import POSTPROCESSORS, make_postprocessor
    from isoscope.commands.analyze import build_report
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model

    result = extract(
        load_model("default", device="cpu"),
        bundled_corpus(),
        ExtractionSettings(sample_size=args.sample_size),
    )

    def before() -> None:
        anisotropy_by_state(result)
        for s in range(result.num_states):
            outlier_dims(result, s)
            outliers_by_criterion(result, s)

    now = median_seconds(lambda: build_report(result), args.repeats)
    old = median_seconds(before, args.repeats)
    timings = {"none": median_seconds(lambda: by_state(result), args.repeats)}
    for name in POSTPROCESSORS:
        if name == "none":
            continue
        if name == "clip":
            dims = [outlier_dims(result, s) for s in range(result.num_states)]
            processor = lambda s, dims=dims: make_postprocessor("clip", dims=dims[s])  # noqa: E731
        else:
            processor = make_postprocessor(name)
        timings[name] = median_seconds(lambda p=processor: by_state(result, p), args.repeats)
    report = build_report(result)
    print(
        json.dumps(
            {
                "corpus": {
                    "texts": result.num_texts,
                    "tokens": result.num_tokens,
                    "sample": len(result.sample_index),
                },
                "threads": os.environ.get("OMP_NUM_THREADS", "default"),
                "analyze_report_s": now,
                "analyze_report_before_s": old,
                "added_s": round(now - old, 3),
                "by_state_s": timings,
                "minilm": [
                    {
                        "state": layer["name"],
                        "anisotropy": round(layer["anisotropy"], 4),
                        "anisotropy_clipped": round(layer["anisotropy_clipped"], 4),
                        "isoscore": round(layer["isoscore"], 4),
                        "outlier_dims": layer["outlier_dims"],
                        "top_cosine_dim": layer["top_cosine_dims"][0]
                        if layer["top_cosine_dims"]
                        else None,
                    }
                    for layer in report["layers"]
                ],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
