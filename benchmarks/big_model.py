"""A big decoder on one machine: load time, peak RSS beside the preflight's estimate, and the
extraction's speed against a plain transformers forward over the same texts, in the same run.

Writes a random-init Qwen2-shaped decoder (``--params``, default 1.5B, as bf16 safetensors) to a
temporary folder, then runs each phase in a fresh process so each peak RSS is its own:

- ``preflight``: the parameters and the bytes the load needs in ``--dtype`` (from the headers);
- ``load``: ``load_model`` of the folder (seconds, peak RSS);
- ``full``: load + extraction of all ``--texts`` texts; its measured speed is recorded as the app
  records it (:mod:`backend.engine.throughput`, in a temporary cache folder);
- ``first_look``: the Overview's first page as the app makes it for this model: load, the
  first-look plan from the recorded speed (the longest prefix estimated to fit ``--budget``
  seconds, default 60; the whole corpus when it fits), its extraction, the outlier dims and the
  anisotropy per hidden state; ``first_look_s`` is the wall time of all of it, load included;
- ``plain``: load with ``AutoModel.from_pretrained`` + ``model(**tokenizer(batch),
  output_hidden_states=True)`` over the same texts in the same batch size.

``ratio_full_vs_plain`` is the plain forward's seconds / the extraction's seconds (>= 0.9 is the
issue's target; 1.0 means isoscope adds nothing). Prints one JSON object.

Usage: ``python benchmarks/big_model.py [--params 1.5B] [--texts 320] [--budget 60]
[--dtype float32|bfloat16] [--device cpu|cuda] [--max-length 128] [--batch-size 32]``
(the checkpoint is stored in bf16 either way; isoscope offers bfloat16 on a GPU only). Check it on a small config first
(``--params 0.1B``); the real measurement belongs on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from backend.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()

# Qwen2-1.5B's shape; --params scales the width and depth from it.
QWEN2_15B = {"hidden": 1536, "layers": 28, "heads": 12, "kv_heads": 2, "intermediate": 8960}


def shape_for(params: float) -> dict[str, int]:
    """A Qwen2-like shape of about ``params`` parameters (the bundled tokenizer's vocabulary)."""
    scale = (params / 1.5e9) ** (1 / 3)
    heads = max(2, round(QWEN2_15B["heads"] * scale / 2) * 2)
    hidden = heads * 128 if params >= 1e9 else heads * 64
    layers = max(2, round(QWEN2_15B["layers"] * scale))
    return {
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "kv_heads": 2,
        "intermediate": int(hidden * QWEN2_15B["intermediate"] / QWEN2_15B["hidden"]),
    }


def write_checkpoint(folder: Path, params: float) -> dict[str, int]:
    import torch
    from transformers import Qwen2Config, Qwen2Model

    from backend.engine.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    shape = shape_for(params)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate"],
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = Qwen2Model(config).to(torch.bfloat16)
    model.save_pretrained(folder)  # bf16 safetensors
    tokenizer.save_pretrained(folder)
    return shape


def texts(n: int) -> list[str]:
    from backend.engine.corpus import bundled_corpus

    base = list(bundled_corpus().texts)
    return [base[i % len(base)] for i in range(n)]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def phase(name: str, folder: Path, args: argparse.Namespace) -> dict:
    """One phase in this process (see the module docstring)."""
    import torch

    from backend.engine import throughput
    from backend.engine.corpus import corpus_from_text
    from backend.engine.extraction import ExtractionSettings, extract
    from backend.engine.models import load_model

    started = time.perf_counter()
    if name == "preflight":
        from backend.engine.preflight import folder_census, preflight

        plan = preflight(folder_census(folder), args.dtype, args.device)
        return {"parameters": plan.parameters, "estimate_mib": plan.needed_bytes / 2**20}
    if name == "plain":
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(folder, dtype=getattr(torch, args.dtype))
        model = model.to(args.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        loaded_s = time.perf_counter() - started
        batch_texts = texts(args.texts)
        t0 = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, len(batch_texts), args.batch_size):
                enc = tokenizer(
                    batch_texts[i : i + args.batch_size],
                    padding=True,
                    truncation=True,
                    max_length=args.max_length,
                    return_tensors="pt",
                ).to(args.device)
                model(**enc, output_hidden_states=True)
        return {
            "load_s": loaded_s,
            "forward_s": time.perf_counter() - t0,
            "peak_rss_mib": peak_rss_mib(),
        }
    import transformers  # noqa: F401 - imported before the baseline, as load_model imports it

    baseline = peak_rss_mib()  # the interpreter, torch and transformers, before any weights
    started = time.perf_counter()
    loaded = load_model(str(folder), device=args.device, dtype=args.dtype)
    loaded_s = time.perf_counter() - started
    out = {"load_s": loaded_s, "rss_before_load_mib": baseline}
    corpus = corpus_from_text("\n".join(texts(args.texts)))
    settings = ExtractionSettings(max_length=args.max_length, batch_size=args.batch_size)
    speeds = folder.parent / "cache"  # the app's throughput.json, for this run only
    if name == "full":
        t0 = time.perf_counter()
        result = extract(loaded, corpus, settings)
        out["extract_s"] = time.perf_counter() - t0
        out["texts"] = args.texts
        device, parameters = (
            throughput.device_key(loaded.device),
            throughput.parameter_count(loaded.model),
        )
        throughput.record(speeds, device, parameters, result.num_tokens, result.seconds)
    if name == "first_look":
        from backend.analysis.geometry.isotropy import N_PAIRS, PAIR_SEED, anisotropy_by_state
        from backend.analysis.geometry.outliers import outlier_dims_by_state

        counts = throughput.token_counts(loaded.tokenizer, corpus.texts, args.max_length)
        plan = throughput.plan_first_look(loaded, corpus, counts, speeds, args.budget)
        result = extract(loaded, plan.corpus if plan else corpus, settings)
        anisotropy_by_state(result, N_PAIRS, PAIR_SEED)
        outlier_dims_by_state(result)
        out["first_look_s"] = time.perf_counter() - started  # load included: the first page
        out["texts"] = result.num_texts
        out["estimated_s"] = plan.seconds if plan else None
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def parse_params(text: str) -> float:
    text = text.strip().upper()
    factor = {"B": 1e9, "M": 1e6}.get(text[-1], 1.0)
    return float(text.rstrip("BM")) * factor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="1.5B")
    parser.add_argument("--texts", type=int, default=320)
    parser.add_argument("--budget", type=float, default=60.0, help="the first look's seconds")
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["bfloat16", "float32"],
        help="the dtype both sides load into (isoscope offers bfloat16 on a GPU only)",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.folder), args)))
        return
    with tempfile.TemporaryDirectory(prefix="isoscope-big-") as tmp:
        folder = Path(tmp) / "ckpt"
        t0 = time.perf_counter()
        shape = write_checkpoint(folder, parse_params(args.params))
        result: dict = {"shape": shape, "write_s": time.perf_counter() - t0, "args": vars(args)}
        for name in ("preflight", "load", "full", "first_look", "plain"):
            argv = [sys.executable, __file__, "--phase", name, "--folder", str(folder)]
            for key in ("texts", "budget", "dtype", "device", "max_length", "batch_size"):
                argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            if proc.returncode:
                raise SystemExit(f"phase {name} failed: {proc.stderr.strip().splitlines()[-1]}")
            result[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        result["ratio_full_vs_plain"] = result["plain"]["forward_s"] / result["full"]["extract_s"]
        load = result["load"]
        result["load_rss_above_baseline_vs_estimate"] = (
            load["peak_rss_mib"] - load["rss_before_load_mib"]
        ) / result["preflight"]["estimate_mib"]
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
