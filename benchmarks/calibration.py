"""The calibration before a load against the whole model's forward pass, on this CPU.

For each ``--shapes`` entry (width x depth x feed-forward width x heads/KV heads, a Qwen2-shaped
decoder with a small vocabulary: the embedding costs nothing per token), builds the whole random
model once, then alternates ``--repeats`` times: the calibration
(:func:`isoscope.engine.budget.calibration.calibrate`: a 2-layer slice, its own build included)
and one forward pass of the whole model on a batch of ``--texts`` x ``--length`` tokens, as the
extraction runs them. Prints one JSON object: the CPU (:func:`benchmarks.estimates.cpu_info`),
the load average before and after, and per shape the calibration's and the forward pass's
seconds per token, their ratio per repeat (1.0: the calibration predicts the model's forward
pass; the extraction's pipeline adds its own share on top) and the calibration's own seconds.

Usage: ``python benchmarks/calibration.py [--shapes 576x30x1536x9/3,896x24x4864x14/2]
[--texts 32] [--length 20,60] [--repeats 3] [--threads N]``. About a minute per shape on an idle
2-core machine.
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
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def parse_shape(text: str) -> dict[str, int]:
    """``896x24x4864x14/2`` -> the Qwen2 config's sizes."""
    width, layers, ffn, heads = text.split("x")
    attention, kv = heads.split("/")
    return {
        "hidden_size": int(width),
        "num_hidden_layers": int(layers),
        "intermediate_size": int(ffn),
        "num_attention_heads": int(attention),
        "num_key_value_heads": int(kv),
    }


def measure(shape_text: str, lengths: list[int], args: argparse.Namespace) -> dict:
    import torch
    from transformers import AutoModel, Qwen2Config

    from isoscope.engine.budget import calibration

    config = Qwen2Config(vocab_size=512, **parse_shape(shape_text))
    shape = calibration.shape_of_config(config)
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    out: dict = {"shape": shape.key, "layers_run": shape.run_layers, "lengths": {}}
    for length in lengths:
        ids = torch.randint(1, 512, (args.texts, length))
        with torch.inference_mode():
            model(input_ids=ids[:4])  # the first pass allocates
        rows = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            predicted = calibration.calibrate(shape, "cpu", length, args.texts)
            calibration_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
            forward = (time.perf_counter() - t0) / ids.numel()
            rows.append(
                {
                    "calibration_s_per_token": predicted,
                    "forward_s_per_token": forward,
                    "ratio": None if predicted is None else predicted / forward,
                    "calibration_s": calibration_s,
                }
            )
        out["lengths"][str(length)] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="576x30x1536x9/3,896x24x4864x14/2")
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--length", default="20,60")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    import torch

    from benchmarks.estimates import cpu_info

    if args.threads:
        torch.set_num_threads(args.threads)
    result: dict = {"cpu": cpu_info(), "threads": torch.get_num_threads(), "args": vars(args)}
    result["load_average_before"] = os.getloadavg()
    lengths = [int(n) for n in args.length.split(",") if n.strip()]
    result["shapes"] = [measure(s, lengths, args) for s in args.shapes.split(",") if s.strip()]
    result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
