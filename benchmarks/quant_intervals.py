"""Are the default end figures of ``isoscope quant`` trustworthy? The bundled decoder on
64 texts of 128 tokens: the command's defaults (end metric on the first texts up to 256 tokens, site
errors on a 256-token sample, α the sweep's best) against an all-token run of the same analysis
(every text's tokens for the end metric; the site errors, which only choose α, on
``--all-error-tokens``, default 1024: every token would hold tokens x the summed site widths
twice, about 8 GB for SmolLM2, and was killed for memory on the shared machine), with each end
figure's 95% bootstrap interval over texts.

Prints JSON: per run, the end figure and interval of every scheme, the scheme ranking, which pairs
of schemes have overlapping intervals, and the seconds; then the ratio default / all-token per
scheme and whether the two rankings agree. Usage: ``python benchmarks/quant_intervals.py
[--texts 64] [--max-length 128] [--end-tokens 256] [--error-tokens 256] [--all-error-tokens 1024]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from isoscope.engine.environment import use_offline_environment  # noqa: E402

use_offline_environment()


def run(loaded, texts, *, max_length: int, end_tokens: int, error_tokens: int) -> dict:
    from isoscope.analysis.quant.readiness import analyse
    from isoscope.analysis.quant.schemes import SCHEMES

    started = time.perf_counter()
    report = analyse(
        loaded,
        texts,
        max_length=max_length,
        end_tokens=end_tokens,
        error_tokens=error_tokens,
        sensitivity=False,
    )
    end = report.end
    return {
        "alpha": report.alpha,
        "end_tokens": report.scan.end_tokens,
        "end_texts": int(report.scan.end_ids.shape[0]),
        "error_tokens": report.scan.error_tokens,
        "end": {k: end[k] for k in SCHEMES},
        "interval": report.interval,
        "ranking": sorted(SCHEMES, key=lambda k: end[k]),
        "overlapping": [list(p) for p in report.overlapping()],
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--end-tokens", type=int, default=256)
    parser.add_argument("--error-tokens", type=int, default=256)
    parser.add_argument("--all-error-tokens", type=int, default=1024)
    args = parser.parse_args()
    from quant import corpus_texts

    from isoscope.engine.load.models import load_model

    texts = corpus_texts(args.texts, args.max_length)
    loaded = load_model("smollm2", device="cpu")
    every = args.texts * args.max_length  # at least every token of the corpus
    default = run(
        loaded,
        texts,
        max_length=args.max_length,
        end_tokens=args.end_tokens,
        error_tokens=args.error_tokens,
    )
    full = run(
        loaded,
        texts,
        max_length=args.max_length,
        end_tokens=every,
        error_tokens=args.all_error_tokens,
    )
    print(
        json.dumps(
            {
                "model": "smollm2",
                "texts": len(texts),
                "default": default,
                "all_tokens": full,
                "ratio_default_over_all": {
                    k: default["end"][k] / full["end"][k] if full["end"][k] else None
                    for k in default["end"]
                },
                "same_ranking": default["ranking"] == full["ranking"],
                "load_average": os.getloadavg()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
