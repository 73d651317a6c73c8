"""Seconds for a sparse autoencoder's encoder on the states the extraction streams, against the
plain extraction: the bundled SmolLM2 ("smollm2"), a random SAE of 16,384 features (ReLU, SAELens
files read through the real loader) on its middle state, the bundled corpus's first texts.

Both runs are the same extraction (every token, first position included); the SAE run adds the
observer that encodes, decodes and reduces each batch on the model's device
(:func:`isoscope.analysis.sae.scan.run_sae`). Prints JSON: per variant the median, min and max of
the runs, the SAE's overhead over the plain pass, tokens per second, the device and the load
average before the runs. Usage: ``python benchmarks/sae.py [--runs 3] [--texts 64]
[--max-length 128] [--width 16384] [--activation relu|topk] [--device auto]``.
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
from isoscope.engine.environment import use_offline_environment  # noqa: E402

use_offline_environment()


def random_sae(folder: Path, d: int, width: int, activation: str, state: int, seed: int = 0):
    """A random SAE in SAELens's layout (unit decoder rows, encoder = decoder^T)."""
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    w_dec = rng.normal(size=(width, d)).astype(np.float32)
    w_dec /= np.linalg.norm(w_dec, axis=1, keepdims=True)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(
        {
            "W_enc": np.ascontiguousarray(w_dec.T),
            "W_dec": w_dec,
            "b_enc": np.full(width, -0.1, np.float32),
            "b_dec": np.zeros(d, np.float32),
        },
        str(folder / "sae_weights.safetensors"),
    )
    cfg = {
        "architecture": "topk" if activation == "topk" else "standard",
        "k": 64,
        "d_in": d,
        "d_sae": width,
        "hook_name": f"blocks.{state - 1}.hook_resid_post",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
    }
    (folder / "cfg.json").write_text(json.dumps(cfg))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--width", type=int, default=16384)
    parser.add_argument("--activation", choices=("relu", "topk"), default="relu")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    import torch

    from isoscope.analysis.sae.load import load_sae, on_model
    from isoscope.analysis.sae.params import SaeSettings
    from isoscope.analysis.sae.scan import run_sae
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import Corpus, bundled_corpus
    from isoscope.engine.load.models import load_model

    loaded = load_model("smollm2", device=args.device)
    corpus = Corpus(bundled_corpus().texts[: args.texts], "bundled (first texts)")
    state = loaded.info.num_layers // 2
    settings = SaeSettings(max_length=args.max_length)
    extraction = ExtractionSettings(max_length=args.max_length, batch_size=settings.batch_size)

    def sync() -> None:
        if loaded.device.type == "cuda":
            torch.cuda.synchronize()

    with tempfile.TemporaryDirectory() as tmp:
        folder = random_sae(
            Path(tmp) / "sae", loaded.info.hidden_size, args.width, args.activation, state
        )
        on = on_model(load_sae(str(folder)), loaded)
        extract(loaded, corpus, extraction)  # warm-up: kernels, allocator, tokenizer
        run_sae(loaded, corpus, on, settings)
        loads = [round(os.getloadavg()[0], 2)]
        plain, with_sae, tokens = [], [], 0
        for _ in range(args.runs):
            sync()
            started = time.perf_counter()
            result = extract(loaded, corpus, extraction)
            sync()
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            reading, _ = run_sae(loaded, corpus, on, settings)
            sync()
            with_sae.append(time.perf_counter() - started)
            tokens = result.num_tokens
    median_plain, median_sae = statistics.median(plain), statistics.median(with_sae)
    print(
        json.dumps(
            {
                "model": "smollm2 (bundled SmolLM2-135M)",
                "device": loaded.info.device,
                "sae": {"width": args.width, "activation": args.activation, "state": state},
                "texts": len(corpus),
                "tokens": tokens,
                "max_length": args.max_length,
                "runs": args.runs,
                "plain_extraction_s": {
                    "median": round(median_plain, 3),
                    "min": round(min(plain), 3),
                    "max": round(max(plain), 3),
                },
                "extraction_with_sae_s": {
                    "median": round(median_sae, 3),
                    "min": round(min(with_sae), 3),
                    "max": round(max(with_sae), 3),
                },
                "sae_overhead_ratio": round(median_sae / median_plain, 3),
                "tokens_per_s_with_sae": round(tokens / median_sae, 1),
                "ordinary_fvu": reading.fidelity["ordinary"]["fvu"],
                "load_average_before": loads,
                "cpu_count": os.cpu_count(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
