"""Seconds for ``isoscope quant`` on the bundled decoder: 64 texts of 128 tokens, the
whole command as a user runs it (a subprocess: model load, the pass, six schemes, the per-block
sensitivity, the JSON), three runs. Target: <= 60 s on 2 CPU cores.

Prints JSON: the median, min and max of the runs, the load average before each run (the machine
may be shared), and the torch thread count. Usage: ``python benchmarks/quant.py [--runs 3]
[--texts 64] [--max-length 128] [--threads N] [--recipe]`` (``--threads`` sets OMP_NUM_THREADS for the
command; default: torch's own choice).
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
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import offline_env, use_offline_environment  # noqa: E402

use_offline_environment()


def corpus_texts(n: int, min_tokens: int) -> list[str]:
    """``n`` texts of at least ``min_tokens`` tokens (bundled texts joined cyclically)."""
    from isoscope.engine.extraction import tokenize
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model

    loaded = load_model("smollm2", device="cpu")
    pool = list(bundled_corpus().texts)
    texts, k = [], 0
    while len(texts) < n:
        parts = []
        while True:
            parts.append(pool[k % len(pool)])
            k += 1
            if tokenize(loaded, [" ".join(parts)], 4 * min_tokens).lengths[0] >= min_tokens:
                break
        texts.append(" ".join(parts))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--recipe", action="store_true", help="also write the llm-compressor recipe"
    )
    args = parser.parse_args()
    texts = corpus_texts(args.texts, args.max_length)
    env = offline_env()
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    seconds, loads = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "texts.txt"
        path.write_text("\n".join(texts) + "\n")
        out = Path(tmp) / "quant.json"
        for _ in range(args.runs):
            loads.append(round(os.getloadavg()[0], 2))
            started = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "backend",
                    "quant",
                    "--model",
                    "smollm2",
                    "--texts",
                    str(path),
                    "--out",
                    str(out),
                    "--max-length",
                    str(args.max_length),
                    *(["--recipe", str(Path(tmp) / "recipe.yaml")] if args.recipe else []),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
            seconds.append(time.perf_counter() - started)
            if proc.returncode:
                sys.exit(proc.stderr)
        data = json.loads(out.read_text())
    print(
        json.dumps(
            {
                "command": "isoscope quant --model smollm2 (bundled SmolLM2-135M)"
                + (" --recipe" if args.recipe else ""),
                "texts": data["corpus"]["texts"],
                "tokens": data["corpus"]["tokens"],
                "max_length": args.max_length,
                "error_tokens": data["corpus"]["error_tokens"],
                "end_tokens": data["corpus"]["end_tokens"],
                "sites": len(data["sites"]),
                "runs": args.runs,
                "median_s": round(statistics.median(seconds), 1),
                "min_s": round(min(seconds), 1),
                "max_s": round(max(seconds), 1),
                "seconds": [round(s, 1) for s in seconds],
                "load_average_before": loads,
                "omp_num_threads": env.get("OMP_NUM_THREADS"),
                "cpu_count": os.cpu_count(),
                "target_s": 60,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
