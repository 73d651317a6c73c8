"""float32 vs a bfloat16-rounded token sample: how far do the sample-based figures move?

Extracts the bundled corpus (default settings, through the disk cache), rounds the token sample to
bfloat16 and back, and compares per-state anisotropy, IsoScore, the cosine histogram and Timkey's
top cosine dims (``isoscope.analysis.anisotropy.by_state``). Prints JSON. Why isoscope keeps
float32: docs/caching.md.

Usage: ``python benchmarks/sample_dtype.py [MODEL]`` (default ``default``; e.g. ``smollm2``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def main() -> None:
    from isoscope.analysis.anisotropy import by_state
    from isoscope.engine.device import to_numpy
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model
    from isoscope.engine.store.cached_extract import cached_extract

    source = sys.argv[1] if len(sys.argv) > 1 else "default"
    loaded = load_model(source, device="cpu")
    result = cached_extract(loaded, bundled_corpus(), ExtractionSettings())
    rounded = to_numpy(
        torch.from_numpy(result.sample_vectors).to(torch.bfloat16), dtype=torch.float32
    )
    a = by_state(result, similarity=False)
    b = by_state(replace(result, sample_vectors=rounded), similarity=False)
    same_dims = all(
        [d for d, _ in x] == [d for d, _ in y] for x, y in zip(a.top_dims, b.top_dims, strict=True)
    )
    rel = np.abs(rounded - result.sample_vectors) / np.maximum(np.abs(result.sample_vectors), 1e-30)
    print(
        json.dumps(
            {
                "model": source,
                "sample_shape": list(result.sample_vectors.shape),
                "max_abs_diff_anisotropy": float(np.max(np.abs(a.anisotropy - b.anisotropy))),
                "max_abs_diff_isoscore": float(np.nanmax(np.abs(a.isoscore - b.isoscore))),
                "max_abs_diff_histogram_counts": int(
                    np.max(np.abs(a.histogram_counts - b.histogram_counts))
                ),
                "top_cosine_dims_same": same_dims,
                "max_relative_error_of_a_value": float(rel.max()),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
