"""Extraction throughput and memory: the full pipeline against a plain transformers forward pass.

Prints one JSON object:
- ``throughput``: tokens/s of ``isoscope.engine.extraction.extract`` (tokenize, length-sorted batches,
  hidden states to CPU, streaming float64 statistics, token sample) and of two plain
  ``model(**tokenizer(batch))`` loops on the same texts in the same process: one in corpus order
  (what a notebook does) and one over the same length-sorted batches with
  ``output_hidden_states=True`` (the strict baseline). ``ratio_*`` = pipeline / baseline: for the
  strict baseline, the median over ``--rounds`` rounds of the ratio within each round. On
  the CPU the pipeline runs with the compiled statistics kernel (compiled once before timing, as
  the app's background warm-up does; ``statistics_kernel_compile_s``) and again with eager
  statistics (``ratio_eager_statistics_*``), as an extraction does before the warm-up is done.
  On the CPU every loop runs under the allocator setting an extraction of this model uses
  (``allocator_keeps_freed_memory``: freed memory kept for reuse, see backend/engine/allocator.py),
  set before the first loop.
- ``phase_seconds``: where each variant's time goes (median seconds over the rounds: tokenize,
  the model call, the gather of analysed tokens, the statistics, the sample's writes, the rest),
  and ``forward_ratio_vs_plain_sorted_per_round``: the plain loop's model-call seconds over the
  pipeline's, per round (1.0: the forward runs as fast inside the pipeline as alone).
- ``cpu``: the CPU's model name, logical CPUs, its vector and matrix flags and torch's threads
  and kernel capability (ratios differ between CPUs: quote them with this).
- ``memory``: peak RSS of a fresh process that extracts 1k and 20k texts (streaming keeps it flat).
- on CUDA, ``peak_device_mib``: peak allocated GPU memory of each variant.

Usage: ``python benchmarks/extract.py [--texts 2000] [--model default] [--device auto|cpu|cuda]
[--dtype float32|bfloat16] [--token-budget 8192] [--batch-size 32] [--memory-sizes 1000,20000]``;
``--load-memory``: host peak RSS while loading a random ~100M-parameter Llama saved as sharded
safetensors, against the weights' size.
``--model`` takes any load_model source: ``default``, a checkpoint folder, ``smollm2`` (the bundled
decoder, where present), ``random:...``, or ``random-llama[:width=..,layers=..]`` (a random-init
~1B-parameter Llama built from a config on the device; see :func:`random_llama`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def make_texts(n: int) -> list[str]:
    """n texts from the bundled corpus: lines joined in varied pairs so lengths vary."""
    from isoscope.engine.inputs.corpus import bundled_corpus

    base = list(bundled_corpus().texts)
    out = []
    for i in range(n):
        a = base[i % len(base)]
        out.append(a if i % 3 else a + " " + base[(i * 7 + 3) % len(base)])
    return out


LLAMA_1B = {"width": 2048, "layers": 22, "heads": 32, "kv_heads": 4, "intermediate": 5632}


def random_llama(source: str, device: str, dtype: str):
    """``random-llama[:width=..,layers=..,heads=..,kv_heads=..,intermediate=..]``: a random-init
    Llama-architecture LoadedModel built from a config on the target device (no weights; default
    ~1.0B parameters, TinyLlama's shape) with the bundled tokenizer."""
    import hashlib

    import torch
    from transformers import LlamaConfig, LlamaModel

    from isoscope.engine.device import resolve_device, resolve_dtype
    from isoscope.engine.load.models import ModelParts, bundled_tokenizer, make_loaded

    opts = dict(LLAMA_1B)
    for item in filter(None, source.partition(":")[2].split(",")):
        key, _, value = item.partition("=")
        opts[key.strip()] = int(value)
    dev = resolve_device(device)
    dt = resolve_dtype(dev, dtype)
    tokenizer = bundled_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=opts["width"],
        intermediate_size=opts["intermediate"],
        num_hidden_layers=opts["layers"],
        num_attention_heads=opts["heads"],
        num_key_value_heads=opts["kv_heads"],
        max_position_embeddings=2048,
    )
    torch.manual_seed(0)
    with torch.device(dev):  # initialise where it runs: seconds on a GPU
        model = LlamaModel(config)
    model.to(dt)
    params = sum(p.numel() for p in model.parameters())
    canonical = "random-llama:" + ",".join(f"{k}={v}" for k, v in sorted(opts.items()))
    parts = ModelParts(
        model=model,
        tokenizer=tokenizer,
        source=canonical,
        display=f"random-init Llama ({params / 1e9:.2f} B parameters)",
        fingerprint=hashlib.sha256(canonical.encode()).hexdigest()[:20],
        random=True,
        spec={"source": canonical},
    )
    return make_loaded(parts, dev, dt)


def load_bench_model(source: str, device: str, dtype: str):
    if source.startswith("random-llama"):
        return random_llama(source, device, dtype)
    from isoscope.engine.load.models import load_model

    return load_model(source, device=device, dtype=dtype)


def _sync(loaded) -> None:
    import torch

    if loaded.device.type == "cuda":
        torch.cuda.synchronize(loaded.device)


def _reset_peak(loaded) -> None:
    import torch

    if loaded.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(loaded.device)


def _peak_mib(loaded) -> float | None:
    import torch

    if loaded.device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(loaded.device) / 2**20, 1)


class Phases:
    """Seconds spent in each phase of an extraction, by wrapping the pipeline's own functions
    while it runs (a few perf_counter calls per batch): ``tokenize``, ``forward`` (the model call
    alone), ``gather`` (analysed tokens of each state copied out of the hidden states),
    ``statistics`` (the moments and extreme-index counts), ``sample`` (the token sample's
    writes) and ``other`` (the rest: batching, padding, merging, the result's assembly)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._open: dict[str, int] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def timed(self, name: str, fn):
        """``fn`` timed under ``name``; a call inside another call of the same name (a group of
        states trying the kernel first) counts once, in the outer one."""

        def wrapper(*args, **kwargs):
            if self._open.get(name):
                return fn(*args, **kwargs)
            self._open[name] = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._open[name] = 0
                self.add(name, time.perf_counter() - start)

        return wrapper

    def run(self, fn):
        """``fn()`` with the pipeline's phases timed; returns (its result, total seconds)."""
        from isoscope.engine.extraction import forward
        from isoscope.engine.extraction.kernel import MomentsKernel
        from isoscope.engine.extraction.sample import SampleCandidates
        from isoscope.engine.extraction.stats import EagerStates, RunningStats

        patched = [
            (forward, "tokenize_part"),
            (forward, "forward_hidden_states"),
            (forward, "_reduce_batch"),
            (EagerStates, "reduce"),  # eager statistics, state by state (the CPU)
            (RunningStats, "add_states"),  # eager statistics in groups (GPUs, other dtypes)
            (MomentsKernel, "reduce_state"),  # the compiled kernel, state by state
            (SampleCandidates, "write"),
        ]
        names = ["tokenize", "forward", "reduce"] + ["statistics"] * 3 + ["sample"]
        saved = [getattr(owner, attr) for owner, attr in patched]
        for (owner, attr), name, fn0 in zip(patched, names, saved, strict=True):
            setattr(owner, attr, self.timed(name, fn0))
        start = time.perf_counter()
        try:
            result = fn()
        finally:
            total = time.perf_counter() - start
            for (owner, attr), fn0 in zip(patched, saved, strict=True):
                setattr(owner, attr, fn0)
        reduce = self.seconds.pop("reduce", 0.0)
        self.seconds["gather"] = (
            reduce - self.seconds.get("statistics", 0) - self.seconds.get("sample", 0)
        )
        self.seconds["other"] = total - sum(self.seconds.values())
        return result, total


def cpu_description() -> dict:
    """The CPU the figures were measured on: its model name, logical CPUs, the vector and matrix
    extensions that decide which matmul kernels run, and torch's threads."""
    import platform

    import torch

    name, flags, info = platform.processor() or platform.machine(), set(), {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key in ("model name", "cpu family", "model", "stepping") and key not in info:
                info[key] = value
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:  # not Linux: the name platform gives
        pass
    if "model name" in info:  # a VM's name can be generic: family and model tell the part
        name = info["model name"] + "".join(
            f", {key} {info[key]}" for key in ("cpu family", "model", "stepping") if key in info
        )
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")
    return {
        "model": name,
        "logical_cpus": os.cpu_count(),
        "vector_flags": [f for f in wanted if f in flags],
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def plain_forward(
    loaded, texts, max_length: int, batch_size: int, sort: bool, phases: Phases | None = None
) -> tuple[float, int]:
    import torch

    tok, model = loaded.tokenizer, loaded.encoder
    order = list(range(len(texts)))
    if sort:
        lengths = [
            len(ids) for ids in tok(texts, truncation=True, max_length=max_length)["input_ids"]
        ]
        order.sort(key=lambda i: -lengths[i])
    tokens = 0
    start = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            batch = [texts[i] for i in order[s : s + batch_size]]
            enc = tok(
                batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
            enc = {k: v.to(loaded.device) for k, v in enc.items() if k != "token_type_ids"}
            began = time.perf_counter()
            model(**enc, output_hidden_states=sort)
            if phases is not None:
                phases.add("forward", time.perf_counter() - began)
            tokens += int(enc["attention_mask"].sum())
    _sync(loaded)
    return time.perf_counter() - start, tokens


def throughput(
    model_source: str,
    n_texts: int,
    max_length: int,
    batch_size: int,
    *,
    device: str = "auto",
    dtype: str = "float32",
    token_budget: int = 8192,
    rounds: int = 5,
) -> dict:
    import numpy as np

    from isoscope.engine.allocator import for_extraction
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.load.models import weight_bytes

    # The allocator keeps freed memory for reuse from an extraction's first CPU forward pass on
    # (process-wide, see backend/engine/allocator.py): set it before any loop, so the
    # plain loops run under the same allocator as the pipeline.
    loaded = load_bench_model(model_source, device, dtype)
    allocator_keeps_memory = loaded.device.type == "cpu" and for_extraction(
        weight_bytes(loaded.model)
    )
    texts = make_texts(n_texts)
    corpus = Corpus(tuple(texts), "bench")
    settings = ExtractionSettings(
        max_length=max_length, batch_size=batch_size, token_budget=token_budget
    )
    plain_forward(loaded, texts[:64], max_length, batch_size, sort=False)  # warm-up
    # The statistics kernel as in a warm app (its background warm-up compiles it); the pipeline
    # also runs with eager statistics, as an extraction does before the warm-up has finished.
    from isoscope.engine.extraction.stats import MOMENTS

    compile_s = MOMENTS.compile(loaded.dtype) if loaded.device.type == "cpu" else None
    compiled = loaded.device.type == "cpu" and MOMENTS.ready(loaded.dtype)
    results: dict[str, list[float]] = {}
    peaks: dict[str, float | None] = {}
    tokens = {"n": 0}

    phases: dict[str, list[dict[str, float]]] = {}

    def plain(name: str, sort: bool) -> None:
        _reset_peak(loaded)
        timer = Phases()
        t, n = plain_forward(loaded, texts, max_length, batch_size, sort=sort, phases=timer)
        results.setdefault(name, []).append(n / t)
        phases.setdefault(name, []).append(timer.seconds | {"other": t - timer.seconds["forward"]})
        peaks[name] = _peak_mib(loaded)

    def pipeline(name: str) -> None:
        _reset_peak(loaded)
        timer = Phases()
        result, t = timer.run(lambda: extract(loaded, corpus, settings))
        results.setdefault(name, []).append(result.num_tokens / t)
        phases.setdefault(name, []).append(timer.seconds)
        peaks[name] = _peak_mib(loaded)
        tokens["n"] = result.num_tokens

    def pipeline_eager() -> None:
        with MOMENTS.suspended():
            pipeline("isoscope_pipeline_eager_statistics")

    # The plain loop in corpus order (a notebook's) is slow and only a reference: once. The others
    # run once per round in a rotating order, so the machine's drift hits each alike; ratios are
    # taken within a round, and their median over the rounds is reported.
    plain("plain_corpus_order", sort=False)
    variants = {
        "plain_sorted_hidden_states": lambda: plain("plain_sorted_hidden_states", sort=True),
        "isoscope_pipeline": lambda: pipeline("isoscope_pipeline"),
    }
    if compiled:
        variants["isoscope_pipeline_eager_statistics"] = pipeline_eager
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            variants[name]()

    def paired(name: str) -> list[float]:
        base = results["plain_sorted_hidden_states"]
        return [round(a / b, 3) for a, b in zip(results[name], base, strict=True)]

    median = {k: float(np.median(v)) for k, v in results.items()}

    def phase_medians(name: str) -> dict[str, float]:
        rows = phases[name]
        return {k: round(float(np.median([r.get(k, 0.0) for r in rows])), 3) for k in rows[0]}

    def forward_paired(name: str) -> list[float]:
        """Per round: the plain loop's forward seconds / the pipeline's (1.0: as fast)."""
        base = phases["plain_sorted_hidden_states"]
        return [
            round(b["forward"] / a["forward"], 3) for a, b in zip(phases[name], base, strict=True)
        ]

    out = {
        "model": loaded.info.display_name,
        "device": loaded.info.device,
        "texts": n_texts,
        "tokens": tokens["n"],
        "settings": settings.to_dict(),
        "rounds": rounds,
        "statistics_kernel": "compiled" if compiled else "eager",
        "statistics_kernel_compile_s": None if compile_s is None else round(compile_s, 2),
        "statistics_kernel_error": MOMENTS.error,
        "allocator_keeps_freed_memory": allocator_keeps_memory,
        "tokens_per_s": {k: round(v, 1) for k, v in median.items()},
        "peak_device_mib": peaks if loaded.device.type == "cuda" else None,
        "ratio_vs_plain_corpus_order": round(
            median["isoscope_pipeline"] / median["plain_corpus_order"], 3
        ),
        "ratio_vs_plain_sorted_hidden_states": round(
            float(np.median(paired("isoscope_pipeline"))), 3
        ),
        "ratio_vs_plain_sorted_hidden_states_per_round": paired("isoscope_pipeline"),
        # Where the time goes (median seconds per phase over the rounds, see Phases), and the
        # model call alone inside the pipeline against the same call in the plain loop.
        "phase_seconds": {name: phase_medians(name) for name in phases},
        "forward_ratio_vs_plain_sorted_per_round": forward_paired("isoscope_pipeline"),
    }
    if compiled:
        eager = paired("isoscope_pipeline_eager_statistics")
        out["ratio_eager_statistics_vs_plain_sorted_hidden_states"] = round(
            float(np.median(eager)), 3
        )
        out["ratio_eager_statistics_vs_plain_sorted_hidden_states_per_round"] = eager
    return out


def child_peak(n_texts: int, model_source: str, device: str, dtype: str) -> None:
    """Run in a fresh process: extract n_texts and print peak RSS (MiB)."""
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import Corpus

    loaded = load_bench_model(model_source, device, dtype)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    corpus = Corpus(tuple(make_texts(n_texts)), "bench")
    start = time.perf_counter()
    result = extract(loaded, corpus, ExtractionSettings())
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "texts": n_texts,
                "tokens": result.num_tokens,
                "seconds": round(seconds, 1),
                "peak_rss_mib": round(peak, 1),
                "rss_after_model_load_mib": round(before, 1),
            }
        )
    )


def memory(model_source: str, sizes: list[int], device: str, dtype: str) -> list[dict]:
    rows = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n), "--model", model_source]
            + ["--device", device, "--dtype", dtype],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def save_random_llama(folder: str, width: int, layers: int, dtype: str, shard: str) -> None:
    """Child process: a random-init Llama-architecture checkpoint (bundled tokenizer) in folder."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    from isoscope.engine.load.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=int(width * 8 / 3) // 64 * 64,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64),
        num_key_value_heads=max(1, width // 64),
        max_position_embeddings=2048,
    )
    torch.manual_seed(0)
    model = LlamaModel(config).to(getattr(torch, dtype))
    model.save_pretrained(folder, max_shard_size=shard)
    tokenizer.save_pretrained(folder)


def child_load(folder: str, dtype: str, device: str, device_map: str | None) -> None:
    """Child process: peak host RSS while load_model reads the checkpoint, vs the weights' bytes."""
    import psutil

    from isoscope.engine.load.models import load_model

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    loaded = load_model(folder, device=device, dtype=dtype, device_map=device_map)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    files = sum(p.stat().st_size for p in Path(folder).glob("*.safetensors")) / 2**20
    in_memory = sum(p.numel() * p.element_size() for p in loaded.model.parameters()) / 2**20
    print(
        json.dumps(
            {
                "load_dtype": dtype,
                "device": loaded.info.device,
                "parameters_m": round(loaded.info.num_parameters / 1e6, 1),
                "shards": len(list(Path(folder).glob("*.safetensors"))),
                "weights_file_mib": round(files, 1),
                "weights_in_memory_mib": round(in_memory, 1),
                "rss_before_load_mib": round(before, 1),
                "peak_rss_mib": round(peak, 1),
                "rss_after_load_mib": round(psutil.Process().memory_info().rss / 2**20, 1),
                "load_peak_over_weights_in_memory": round((peak - before) / in_memory, 3),
                "seconds": round(seconds, 1),
            }
        )
    )


def load_memory(width: int, layers: int, device: str, cases: list[tuple[str, str]]) -> list[dict]:
    """Save random Llama checkpoints (stored dtype, loaded dtype) in sharded safetensors to a temp
    folder and load each in a fresh process; report host peak RSS during load_model."""
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for stored, loaded_as in cases:
            folder = str(Path(tmp) / f"llama-{stored}")
            if not Path(folder).exists():
                subprocess.run(
                    [sys.executable, __file__, "--save-llama", folder, "--dtype", stored]
                    + ["--llama-width", str(width), "--llama-layers", str(layers)],
                    check=True,
                )
            out = subprocess.run(
                [sys.executable, __file__, "--child-load", folder, "--dtype", loaded_as]
                + ["--device", device],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"stored_dtype": stored, **row})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32, help="cap on texts per batch")
    parser.add_argument("--token-budget", type=int, default=8192, help="padded tokens per batch")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")
    parser.add_argument("--dtype", default="float32", help="float32 | bfloat16 (GPU only)")
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds (median of per-round ratios)"
    )
    parser.add_argument("--memory-sizes", default="1000,20000")
    parser.add_argument(
        "--load-memory",
        action="store_true",
        help="only measure host peak RSS while loading a random ~100M Llama checkpoint saved as "
        "sharded safetensors (fp32, and bf16 on a GPU or stored bf16 loaded as fp32 on the CPU)",
    )
    parser.add_argument("--llama-width", type=int, default=768)
    parser.add_argument("--llama-layers", type=int, default=12)
    parser.add_argument("--device-map", default=None, help="auto: accelerate placement")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--save-llama", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-load", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from isoscope.engine.environment import quiet_libraries

    quiet_libraries()
    if args.child:
        child_peak(args.child, args.model, args.device, args.dtype)
        return
    if args.save_llama:
        save_random_llama(args.save_llama, args.llama_width, args.llama_layers, args.dtype, "100MB")
        return
    if args.child_load:
        child_load(args.child_load, args.dtype, args.device, args.device_map)
        return
    import torch

    if args.load_memory:
        gpu = args.device in ("cuda", "auto") and torch.cuda.is_available()
        cases = [("float32", "float32"), ("bfloat16", "bfloat16" if gpu else "float32")]
        report = {
            "benchmark": "load_memory",
            "rows": load_memory(args.llama_width, args.llama_layers, args.device, cases),
        }
        print(json.dumps(report, indent=1))
        return

    report = {
        "benchmark": "extract",
        "cpu": cpu_description(),
        "throughput": throughput(
            args.model,
            args.texts,
            args.max_length,
            args.batch_size,
            device=args.device,
            dtype=args.dtype,
            token_budget=args.token_budget,
            rounds=args.rounds,
        ),
        "memory": memory(
            args.model,
            [int(s) for s in args.memory_sizes.split(",") if s],
            args.device,
            args.dtype,
        ),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
