"""Seconds for the full one-dimension-at-a-time LayerNorm ablation sweep on the default model (CPU).

Compares the batched sweep (``copies`` ablated copies of the batch per forward pass, exact via
masked norm outputs) with the naive loop (zero gamma_j, beta_j, one forward per dim) on the same
texts, checks they agree, and prints JSON. Usage: ``python benchmarks/ablation.py [--texts 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def main() -> None:
    import numpy as np
    import torch

    from isoscope.analysis.layernorm.ablation import sweep
    from isoscope.engine.environment import quiet_libraries
    from isoscope.engine.extraction import tokenize
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--dims", type=int, default=None, help="first N dims only (default: all)")
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()
    quiet_libraries()
    loaded = load_model("default", device="cpu")
    texts = bundled_corpus().texts[: args.texts]
    tokens = int(tokenize(loaded, texts, args.max_length).lengths.sum())
    dims = range(args.dims or loaded.info.hidden_size)
    batched = sweep(
        loaded, texts, dims=dims, copies=args.copies, max_length=args.max_length, in_place=True
    )
    report = {
        "model": loaded.info.display_name,
        "device": loaded.info.device,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "dims": len(batched.dims),
        "texts": len(texts),
        "tokens": tokens,
        "max_length": args.max_length,
        "norms": batched.norms,
        "batched": {"copies_per_forward": args.copies, "seconds": round(batched.seconds, 2)},
    }
    if not args.skip_naive:
        started = time.perf_counter()
        naive = sweep(
            loaded, texts, dims=dims, method="naive", max_length=args.max_length, in_place=True
        )
        report["naive"] = {
            "forwards": len(naive.dims),
            "seconds": round(time.perf_counter() - started, 2),
        }
        report["speedup"] = round(report["naive"]["seconds"] / max(batched.seconds, 1e-9), 2)
        report["max_abs_difference"] = float(
            np.abs(batched.embedding_cosine - naive.embedding_cosine).max()
        )
    drift = 1 - batched.embedding_cosine[:, -1]
    top = np.argsort(-drift)[:8]
    report["top_dims_final_state"] = [
        {"dim": int(batched.dims[i]), "drift": round(float(drift[i]), 5)} for i in top
    ]
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
