"""Announced against measured, at sizes the device has not run yet: the first-page estimate's
phases (a GGUF's conversion, the load, the extraction) for a ladder of model sizes, each run once
cold, in increasing size order, from an empty speed record.

Writes a random-init Qwen2-shaped decoder per ``--sizes`` entry (bf16 safetensors; the shape of
:func:`benchmarks.big_model.shape_for`) and one ``--gguf`` sized Qwen2 GGUF file (F32 tensors,
a byte-level vocabulary: ``tests/gguf_files.py``) into a temporary folder, with the isoscope
cache (``speeds.json``, the GGUF's converted copy) in a fresh folder beside them. Then, smallest
first, each model runs in a fresh process as ``isoscope analyze`` would: the time preflight's
estimate (:func:`isoscope.engine.budget.time_estimate.time_preflight`, before the load), then the load
(``load_model``; a GGUF's conversion inside it, timed apart) and the extraction through the disk
cache (``cached_extract``, which records the device's speeds for the next run). Nothing else
runs between them, so each size is announced only from the smaller ones before it.

Prints one JSON object: per run the parameters, the padded tokens, each phase announced and
measured with the basis the estimate gave, the totals, ``ratio`` (announced / measured total;
the target is 0.7-1.4) and the measured ``rate`` (as recorded); ``growth_above_knee``, the slope
of log rate over log size of the runs beyond the cache knee (the measurement behind
``CPU_GROWTH_PRIOR``); the CPU model and the load average before and after. The very first run
has no extraction estimate (nothing is recorded yet: the first batch measures it).

Usage: ``python benchmarks/estimates.py [--sizes 30M,120M,400M,1.5B] [--gguf 200M] [--texts 96]
[--max-length 64] [--device cpu]``; ``--gguf 0`` leaves the GGUF out. A full ladder takes about
10 minutes on an idle 2-core machine; timings on a shared machine are indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def write_gguf_model(path: Path, params: float) -> None:
    """A Qwen2 GGUF file of about ``params`` parameters (F32 tensors, tied embeddings)."""
    import torch
    from transformers import Qwen2ForCausalLM

    from benchmarks.big_model import qwen2_config, shape_for
    from tests.gguf_files import gpt2_vocabulary, write_gguf

    vocab = gpt2_vocabulary()
    shape = shape_for(params, len(vocab["tokens"]))
    config = qwen2_config(
        shape,
        len(vocab["tokens"]),
        tie_word_embeddings=True,
        bos_token_id=vocab["bos"],
        eos_token_id=vocab["eos"],
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    write_gguf(model, path, "qwen2", vocab)


def run_one(model: str, args: argparse.Namespace) -> dict:
    """One cold run of ``model`` in this process (module doc)."""
    from benchmarks.big_model import texts
    from isoscope.engine.budget import throughput, time_estimate
    from isoscope.engine.budget.batching import Batching, padded_tokens
    from isoscope.engine.extraction import ExtractionSettings
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.engine.load import gguf
    from isoscope.engine.load.models import load_model
    from isoscope.engine.store.cache import ResultCache
    from isoscope.engine.store.cached_extract import cached_extract

    corpus = corpus_from_text("\n".join(texts(args.texts)))
    cache = ResultCache()
    announced: list = []
    on_preflight = time_estimate.time_preflight(
        cache.root, args.device, corpus, args.max_length, announced.append
    )
    converted: list[float] = []
    convert = gguf.convert_gguf

    def timed_convert(path, folder):
        t0 = time.perf_counter()
        try:
            return convert(path, folder)
        finally:
            converted.append(time.perf_counter() - t0)

    gguf.convert_gguf = timed_convert
    started = time.perf_counter()
    loaded = load_model(model, device=args.device, on_preflight=on_preflight)
    loaded_s = time.perf_counter() - started
    settings = ExtractionSettings(max_length=args.max_length)
    t0 = time.perf_counter()
    cached_extract(loaded, corpus, settings, cache=cache)
    extract_s = time.perf_counter() - t0
    measured = {"load": loaded_s - sum(converted), "extraction": extract_s}
    if converted:
        measured["conversion"] = sum(converted)
    (estimate,) = announced
    phases = {p.name: {"seconds": p.seconds, "basis": p.basis} for p in estimate.before}
    phases["extraction"] = {"seconds": estimate.seconds, "basis": estimate.basis or None}
    counts = throughput.token_counts(loaded.tokenizer, corpus.texts, args.max_length)
    run = {
        "model": Path(model).name,
        "parameters": throughput.parameter_count(loaded.model),
        "padded_tokens": padded_tokens(counts, Batching.of(settings)),
        "line": estimate.describe(),
        "phases": {
            name: {
                "announced_s": phases.get(name, {}).get("seconds"),
                "measured_s": seconds,
                "basis": phases.get(name, {}).get("basis"),
            }
            for name, seconds in measured.items()
        },
        "announced_total_s": estimate.total_seconds,
        "measured_total_s": sum(measured.values()),
    }
    total = run["announced_total_s"]
    run["ratio"] = None if total is None else total / run["measured_total_s"]
    net = max(extract_s - throughput.EXTRACTION_FIXED_S, extract_s / 2)  # as it is recorded
    run["rate"] = net / (run["parameters"] * run["padded_tokens"])
    return run


def growth(runs: list[dict]) -> float | None:
    """The slope of log rate over log size between the ladder's runs above this machine's cache
    knee (what :data:`isoscope.engine.budget.estimates.CPU_GROWTH_PRIOR` assumes before a device has its
    own), None with fewer than two such runs."""
    from isoscope.engine.budget.estimates import cache_knee, slope

    above = [(r["parameters"], r["rate"]) for r in runs if r["parameters"] >= cache_knee("cpu")]
    return slope(above) if len(above) >= 2 else None


def parse_params(text: str) -> float:
    text = text.strip().upper()
    factor = {"B": 1e9, "M": 1e6}.get(text[-1:], 1.0)
    return float(text.rstrip("BM")) * factor


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30M,120M,400M,1.5B")
    parser.add_argument("--gguf", default="200M", help="the GGUF's size (0: no GGUF)")
    parser.add_argument("--texts", type=int, default=96)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--run", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_one(args.run, args)))
        return
    from benchmarks.big_model import write_checkpoint

    ladder = [(parse_params(s), "safetensors") for s in args.sizes.split(",") if s.strip()]
    if parse_params(args.gguf) > 0:
        ladder.append((parse_params(args.gguf), "gguf"))
    ladder.sort()
    result: dict = {"cpu": cpu_model(), "cores": os.cpu_count(), "args": vars(args)}
    result["load_average_before"] = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="isoscope-estimates-") as tmp:
        env = {**os.environ, "ISOSCOPE_CACHE_DIR": str(Path(tmp) / "cache")}
        runs = []
        for params, kind in ladder:
            t0 = time.perf_counter()
            if kind == "gguf":
                model = Path(tmp) / f"qwen2-{params / 1e6:.0f}M.gguf"
                write_gguf_model(model, params)
            else:
                model = Path(tmp) / f"qwen2-{params / 1e6:.0f}M"
                write_checkpoint(model, params)
            written_s = time.perf_counter() - t0
            argv = [sys.executable, __file__, "--run", str(model)]
            for key in ("texts", "max_length", "device"):
                argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
            if proc.returncode:
                raise SystemExit(f"{model.name} failed: {proc.stderr.strip().splitlines()[-1]}")
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run["written_s"] = written_s
            runs.append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)
            if kind == "safetensors":
                import shutil

                shutil.rmtree(model)  # the disk holds one checkpoint at a time
        result["runs"] = runs
    ratios = [r["ratio"] for r in runs if r["ratio"] is not None]
    result["ratios"] = ratios
    result["growth_above_knee"] = growth(runs)
    result["within_0.7_1.4"] = all(0.7 <= r <= 1.4 for r in ratios)
    result["load_average_after"] = os.getloadavg()
    result["wall_s"] = time.perf_counter() - started
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
