"""Peak RSS of a bf16/fp16 checkpoint loaded as float32 on the CPU, by the two ways of
:mod:`isoscope.engine.load.widening` (``released``: half load widened in place; ``pread``: its
fallback) and transformers' plain float32 load from the mmapped file (``old``), each run in a
fresh process.

Per run: ``load_model(folder, device="cpu", dtype="float32")``'s seconds (wall and CPU), the
process's peak RSS (VmHWM) and RSS after the load, then after one forward pass of a 4 x 128 batch
(the first forward must not fault a mapped file back in). ``summary`` gives median, min and max per mode; prints one
JSON object.

Usage: ``python benchmarks/widen_rss.py FOLDER [--repeats 3]`` (FOLDER: a checkpoint stored in
bf16 or fp16, e.g. one written by ``benchmarks/big_model.py``). Linux only (/proc/self/status).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()
GB = 1e9
MODES = ("released", "pread", "old")


def memory() -> tuple[float, float]:
    """(VmHWM, VmRSS) of this process in GB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return tuple(int(status[k].split()[0]) * 1000 / GB for k in ("VmHWM", "VmRSS"))


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, all threads: less swayed than the wall clock
    by other work on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_run(folder: str, mode: str) -> dict:
    import torch

    import isoscope.engine.load.checkpoints as checkpoints
    from isoscope.engine.load import widening
    from isoscope.engine.load.models import load_model

    if mode == "old":  # transformers' own mmapped reads
        checkpoints.widens = lambda *args, **kwargs: False
    if mode == "pread":  # as where nothing can be released (macOS, Windows)
        widening.RELEASES = False
    start, cpu_start = time.perf_counter(), cpu_seconds()
    loaded = load_model(folder, device="cpu", dtype="float32")
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    peak, after = memory()
    ids = torch.randint(0, loaded.model.config.vocab_size, (4, 128))
    with torch.inference_mode():
        loaded.model(input_ids=ids, attention_mask=torch.ones_like(ids))
    peak_forward, after_forward = memory()
    return {
        "load_s": seconds,
        "load_cpu_s": cpu,
        "peak_gb": peak,
        "rss_after_load_gb": after,
        "peak_after_forward_gb": peak_forward,
        "rss_after_forward_gb": after_forward,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a child run
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.folder, args.one)))
        return
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for _ in range(args.repeats):
        for mode in runs:  # interleaved: a busy spell of the machine hits both modes alike
            child = [sys.executable, __file__, args.folder, "--one", mode]
            out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    summary = {
        mode: {
            key: {
                "median": round(statistics.median(r[key] for r in rs), 2),
                "min": round(min(r[key] for r in rs), 2),
                "max": round(max(r[key] for r in rs), 2),
            }
            for key in rs[0]
        }
        for mode, rs in runs.items()
    }
    print(json.dumps({"folder": args.folder, "summary": summary, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
