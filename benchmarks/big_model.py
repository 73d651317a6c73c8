"""A big decoder on one machine: load time, peak RSS beside the preflight's estimate, the first
look's wall time, and the extraction's speed against a plain transformers forward over the same
texts, in the same run.

Writes a random-init Qwen2-shaped decoder (``--params``, default 1.5B, as bf16 safetensors; the
shape is solved so the count is within a few percent, :func:`shape_for`) to a temporary folder
once, then runs each phase ``--repeats`` times (default 3), each in a fresh process so each peak
RSS is its own:

- ``preflight`` (once): the parameters and the bytes the load needs in ``--dtype`` (headers);
- ``load``: ``load_model`` of the folder (seconds, peak RSS);
- ``full``: load + extraction of ``--ratio-texts`` texts (default: all ``--texts``); its speed is
  recorded as the app records it (:mod:`isoscope.engine.budget.throughput`, in a temporary cache folder);
- ``first_look``: the real Overview page (Streamlit's AppTest, the app's default corpus and
  settings, the model opened by a link ``?model=<folder>``) on a device whose extraction speed
  the ``full`` phase recorded and whose Overview statistics have not been measured yet (each run
  starts from a fresh cache folder holding only that record, so the prior is budgeted): the load,
  the first-look plan (the longest prefix of the corpus estimated to fit ``--budget`` seconds,
  default 60, the load and the statistics included), its extraction and every section of the
  page; ``first_look_s`` is the page's wall time, ``estimated_s`` the plan's estimate of it;
- ``plain``: load with ``AutoModel.from_pretrained`` + ``model(**tokenizer(batch),
  output_hidden_states=True)`` over the same ``--ratio-texts`` texts in the same batch size.

``summary`` gives each figure as median, min and max over the runs (``runs`` has each run;
``rss_target`` each phase's peak RSS over the weights plus one batch, the issue's 1.3x target):
``ratio_plain_vs_extract`` is the plain forward's seconds / the extraction's seconds (>= 0.9 is
the issue's target; 1.0 means isoscope adds nothing), and ``load_rss_above_baseline_vs_estimate``
the load's peak RSS above the interpreter's over the preflight's estimate. Prints one JSON object.

Usage: ``python benchmarks/big_model.py [--params 1.5B] [--texts 320] [--budget 60]
[--repeats 3] [--ratio-texts K] [--dtype float32|bfloat16] [--device cpu|cuda]
[--max-length 128] [--batch-size 32]`` (the checkpoint is stored in bf16 either way; isoscope
offers bfloat16 on a GPU only). Check it on a small config first (``--params 0.1B --repeats 1``);
the real measurement belongs on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()

# Qwen2-1.5B's shape; --params scales the width and depth from it.
QWEN2_15B = {"hidden": 1536, "layers": 28, "heads": 12, "kv_heads": 2, "intermediate": 8960}


def qwen2_parameters(shape: dict[str, int], vocab: int) -> int:
    """The parameter count of a Qwen2Model of ``shape`` (tied embeddings, no LM head): the
    embedding, per layer q/k/v (with biases) and o, the gated MLP and two RMSNorms, the final norm."""
    h, kv = shape["hidden"], shape["kv_heads"] * shape["hidden"] // shape["heads"]
    attention = (h * h + h) + 2 * (h * kv + kv) + h * h
    per_layer = attention + 3 * h * shape["intermediate"] + 2 * h
    return vocab * h + shape["layers"] * per_layer + h


def shape_for(params: float, vocab: int) -> dict[str, int]:
    """A Qwen2-like shape of about ``params`` parameters with a ``vocab``-token embedding: the
    width scales as Qwen2-1.5B's by the cube root, then the depth is solved from what the
    embedding leaves (below 1B the embedding is a large share; a cube-root depth undershoots)."""
    head_dim = 128 if params >= 1e9 else 64  # as Qwen2 at 1.5B, as SmolLM2 / Qwen2-0.5B below
    width = QWEN2_15B["hidden"] * (params / 1.5e9) ** (1 / 3)
    heads = max(2, round(width / head_dim / 2) * 2)
    while True:
        hidden = heads * head_dim
        shape = {
            "hidden": hidden,
            "layers": 1,
            "heads": heads,
            "kv_heads": 2,
            "intermediate": int(hidden * QWEN2_15B["intermediate"] / QWEN2_15B["hidden"]),
        }
        one = qwen2_parameters(shape, vocab)
        per_layer = one - qwen2_parameters({**shape, "layers": 0}, vocab)
        layers = round((params - (one - per_layer)) / per_layer)
        if layers >= 2 or heads == 2:
            return {**shape, "layers": max(2, layers)}
        heads -= 2  # the embedding alone is most of the budget: narrower


def qwen2_config(shape: dict[str, int], vocab_size: int, **extra):
    """The Qwen2 config of a :func:`shape_for` shape (``extra``: token ids, tied embeddings)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=shape["hidden"],
        num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"],
        num_key_value_heads=shape["kv_heads"],
        intermediate_size=shape["intermediate"],
        max_position_embeddings=4096,
        **extra,
    )


def write_checkpoint(folder: Path, params: float) -> dict[str, int]:
    import torch
    from transformers import Qwen2Model

    from isoscope.engine.load.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    shape = shape_for(params, len(tokenizer))
    config = qwen2_config(shape, len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = Qwen2Model(config).to(torch.bfloat16)
    model.save_pretrained(folder)  # bf16 safetensors
    tokenizer.save_pretrained(folder)
    return shape


def texts(n: int) -> list[str]:
    from isoscope.engine.inputs.corpus import bundled_corpus

    base = list(bundled_corpus().texts)
    return [base[i % len(base)] for i in range(n)]


def peak_rss_mib() -> float:
    """This process's own peak RSS: ``VmHWM`` of /proc/self/status, which a new program starts
    afresh. ``ru_maxrss`` is not: Linux carries it over fork and exec, so every phase started
    by the driver that wrote the 1.5B checkpoint began at the driver's 6.2 GB (an idle run read
    6,198 MiB "before the load" in each phase)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def phase(name: str, folder: Path, args: argparse.Namespace) -> dict:
    """One phase in this process (see the module docstring)."""
    import torch

    from isoscope.engine.budget import throughput
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.engine.load.models import load_model

    started = time.perf_counter()
    if name == "preflight":
        from isoscope.engine.load.preflight import folder_census, preflight

        plan = preflight(folder_census(folder), args.dtype, args.device)
        return {"parameters": plan.parameters, "estimate_mib": plan.needed_bytes / 2**20}
    if name == "plain":
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(folder, dtype=getattr(torch, args.dtype))
        model = model.to(args.device).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
        loaded_s = time.perf_counter() - started
        batch_texts = texts(args.ratio_texts)
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
    if name == "first_look":
        return first_look_page(folder, args)
    import transformers  # noqa: F401 - imported before the baseline, as load_model imports it

    baseline = peak_rss_mib()  # the interpreter, torch and transformers, before any weights
    started = time.perf_counter()
    loaded = load_model(str(folder), device=args.device, dtype=args.dtype)
    loaded_s = time.perf_counter() - started
    out = {"load_s": loaded_s, "rss_before_load_mib": baseline}
    settings = ExtractionSettings(max_length=args.max_length, batch_size=args.batch_size)
    ratio_corpus = corpus_from_text("\n".join(texts(args.ratio_texts)))
    speeds = folder.parent / "cache"  # the app's throughput.json, for this run only
    if name == "full":
        t0 = time.perf_counter()
        result = extract(loaded, ratio_corpus, settings)
        out["extract_s"] = time.perf_counter() - t0
        out["texts"] = args.ratio_texts
        device, parameters = (
            throughput.device_key(loaded.device),
            throughput.parameter_count(loaded.model),
        )
        throughput.record(speeds, device, parameters, result.num_tokens, result.seconds)
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def first_look_page(folder: Path, args: argparse.Namespace) -> dict:
    """The ``first_look`` phase: the Overview of ``folder`` in Streamlit's AppTest (module doc)."""
    import os
    import shutil

    from isoscope.engine.budget import page_budget, throughput
    from isoscope.engine.params import BATCH_SIZE, MAX_LENGTH

    if (args.max_length, args.batch_size) != (MAX_LENGTH.default, BATCH_SIZE.default):
        raise SystemExit(
            "the first_look phase runs the app's defaults: leave --max-length and --batch-size"
        )
    cache = Path(tempfile.mkdtemp(prefix="page-", dir=folder.parent))
    speeds = folder.parent / "cache" / throughput.FILE_NAME  # the full phase's record
    if speeds.exists():
        shutil.copy(speeds, cache / throughput.FILE_NAME)
    os.environ["ISOSCOPE_CACHE_DIR"] = str(cache)
    os.environ[page_budget.BUDGET_ENV] = str(args.budget)

    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime.pages_manager import PagesManager

    class Navigation(PagesManager):  # as tests/app/conftest.py: run app.py's frame every time
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            PagesManager.uses_pages_directory = False

    app_test.PagesManager = Navigation
    import isoscope.ui.views.overview as overview

    plans: list = []
    plan_first_look = overview.first_look_plan

    def recorded():
        plans.append(plan_first_look())
        return plans[-1]

    overview.first_look_plan = recorded
    at = app_test.AppTest.from_file(str(ROOT / "app.py"), default_timeout=3600)
    at.query_params["model"] = str(folder)
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    problems = [str(e.value) for e in at.exception] + [e.value for e in at.error]
    if problems:
        raise SystemExit(f"the Overview failed: {problems[0].splitlines()[0]}")
    metrics = {m.label: m.value for m in at.metric}
    plan = plans[0] if plans else None
    return {
        "first_look_s": seconds,
        "texts": int(metrics["Texts"].replace(",", "")),
        "tokens": int(metrics["Tokens analysed"].replace(",", "")),
        "estimated_s": plan.seconds if plan else None,
        "note": next((i.value for i in at.info if "first look" in i.value), None),
        "peak_rss_mib": peak_rss_mib(),
    }


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
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each measured phase (median, [min, max])"
    )
    parser.add_argument(
        "--ratio-texts",
        type=int,
        default=0,
        help="texts of the extraction-vs-plain-forward ratio (default 0: all --texts)",
    )
    parser.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1 or args.ratio_texts < 0 or args.ratio_texts > args.texts:
        parser.error("--repeats must be at least 1 and --ratio-texts between 0 and --texts")
    args.ratio_texts = args.ratio_texts or args.texts
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.folder), args)))
        return
    with tempfile.TemporaryDirectory(prefix="isoscope-big-") as tmp:
        folder = Path(tmp) / "ckpt"
        t0 = time.perf_counter()
        shape = write_checkpoint(folder, parse_params(args.params))
        result: dict = {"shape": shape, "write_s": time.perf_counter() - t0, "args": vars(args)}
        result["preflight"] = run_phase("preflight", folder, args)
        runs = []
        for _ in range(args.repeats):
            run = {name: run_phase(name, folder, args) for name in REPEATED_PHASES}
            runs.append(run)
        result["runs"] = runs
        result["summary"] = summarize(runs, result["preflight"])
        result["summary"]["rss_target"] = rss_target(shape, result["preflight"], runs, args)
        print(json.dumps(result, indent=1))


REPEATED_PHASES = ("load", "full", "first_look", "plain")


def run_phase(name: str, folder: Path, args: argparse.Namespace) -> dict:
    """``phase(name)`` in a fresh process (its own peak RSS); its JSON line."""
    argv = [sys.executable, __file__, "--phase", name, "--folder", str(folder)]
    for key in ("texts", "ratio_texts", "budget", "dtype", "device", "max_length", "batch_size"):
        argv += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"phase {name} failed: {proc.stderr.strip().splitlines()[-1]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> dict:
    """``{"median", "min", "max", "n"}`` of one figure over the runs."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def rss_target(shape: dict, preflight: dict, runs: list[dict], args: argparse.Namespace) -> dict:
    """The issue's memory target, peak RSS <= 1.3 x (weights + one batch): the weights in
    ``--dtype`` (parameters x its size), one batch's hidden states (states x batch x max length
    x width, float32), and each phase's peak over their sum."""
    size = 2 if args.dtype == "bfloat16" else 4
    weights = preflight["parameters"] * size / 2**20
    batch = (shape["layers"] + 1) * args.batch_size * args.max_length * shape["hidden"] * 4 / 2**20
    return {
        "weights_mib": weights,
        "batch_mib": batch,
        "full_peak_vs_weights_and_batch": spread(
            [r["full"]["peak_rss_mib"] / (weights + batch) for r in runs]
        ),
        "first_look_peak_vs_weights_and_batch": spread(
            [r["first_look"]["peak_rss_mib"] / (weights + batch) for r in runs]
        ),
    }


def summarize(runs: list[dict], preflight: dict) -> dict:
    """Each measured figure as median and [min, max] over the runs, the estimates beside them."""
    load_rss = [r["load"]["peak_rss_mib"] - r["load"]["rss_before_load_mib"] for r in runs]
    return {
        "load_s": spread([r["load"]["load_s"] for r in runs]),
        "load_peak_rss_mib": spread([r["load"]["peak_rss_mib"] for r in runs]),
        "load_rss_above_baseline_mib": spread(load_rss),
        "preflight_estimate_mib": preflight["estimate_mib"],
        "load_rss_above_baseline_vs_estimate": spread(
            [m / preflight["estimate_mib"] for m in load_rss]
        ),
        "full_peak_rss_mib": spread([r["full"]["peak_rss_mib"] for r in runs]),
        "first_look_s": spread([r["first_look"]["first_look_s"] for r in runs]),
        "first_look_texts": spread([r["first_look"]["texts"] for r in runs]),
        "first_look_estimated_s": spread(
            [r["first_look"]["estimated_s"] or float("nan") for r in runs]
        ),
        "first_look_peak_rss_mib": spread([r["first_look"]["peak_rss_mib"] for r in runs]),
        "extract_s": spread([r["full"]["extract_s"] for r in runs]),
        "plain_forward_s": spread([r["plain"]["forward_s"] for r in runs]),
        "ratio_plain_vs_extract": spread(
            [r["plain"]["forward_s"] / r["full"]["extract_s"] for r in runs]
        ),
    }


if __name__ == "__main__":
    main()
