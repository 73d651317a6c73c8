"""isoscope's prediction checked against a real quantizer: the bundled SmolLM2 quantized
on the CPU by llm-compressor's ``oneshot`` with the recipe ``isoscope quant --recipe`` writes,
calibrated on the same texts isoscope scanned, then measured on held-out texts the way isoscope
measures its simulated schemes (mean next-token KL(p_full || p_quant) over every non-padding
position; logits from the final state, the output head in full precision).

Prints JSON:

- ``predicted`` / ``measured``: the end KL of the recipe, of the recipe without its ignore list
  (only ``lm_head`` kept), and their difference (what the ignore list buys);
- ``per_block``: for every block, isoscope's predicted KL with only that block W8A8 per token
  (its sensitivity, on the held-out texts) beside the real one (the full-precision model with only
  that block taken from the quantized model: its smoothed norms and int8 projections), and the
  Spearman rank agreement of the two;
- seconds of each stage and the load average (the machine may be shared).

Needs the optional ``quant`` group (``pip install "isoscope[quant]"``: llmcompressor, which pins
transformers<=5.17, so use its own environment). Usage: ``python benchmarks/quant_real.py
[--texts 64] [--held-out 32] [--max-length 128] [--end-tokens 1024]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from backend.engine.environment import use_offline_environment  # noqa: E402

use_offline_environment()


def held_out_kl(model, reference, ids, mask) -> float:
    """isoscope's end metric with the real models: KL(p_full || p_quant) per position, mean."""
    import torch

    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask.long()).logits.float()[mask]
    q = torch.log_softmax(logits, dim=-1)
    return float((reference.exp() * (reference - q)).sum(-1).double().mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=64, help="calibration (scanned) texts")
    parser.add_argument("--held-out", type=int, default=32, help="held-out texts for the KL")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--end-tokens", type=int, default=1024, help="held-out tokens measured")
    args = parser.parse_args()
    try:
        from datasets import Dataset
        from llmcompressor import oneshot
    except ImportError as exc:
        raise SystemExit(
            f"error: {exc}; this benchmark needs the optional quant group "
            '(pip install "isoscope[quant]", in its own environment)'
        ) from None
    import numpy as np
    import torch
    from quant import corpus_texts
    from transformers import AutoModelForCausalLM

    from backend.analysis.quant.readiness import analyse, report_from, scan_sites, spearman
    from backend.analysis.quant.recipe import build_recipe, predict
    from backend.engine.extraction import tokenize
    from backend.engine.models import load_model

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    texts = corpus_texts(args.texts + args.held_out, args.max_length)
    calib, held = texts[: args.texts], texts[args.texts :]
    loaded = load_model("smollm2", device="cpu")
    report = analyse(loaded, calib, max_length=args.max_length)
    recipe = build_recipe(loaded, report)
    seconds["isoscope_quant"] = time.perf_counter() - t0

    # isoscope's prediction on the held-out texts: the calibration scan's statistics (act_scales,
    # token sample) with the held-out texts as the end texts
    t0 = time.perf_counter()
    held_scan = scan_sites(loaded, held, max_length=args.max_length, end_tokens=args.end_tokens)
    scan = replace(
        report.scan,
        end_ids=held_scan.end_ids,
        end_mask=held_scan.end_mask,
        end_reference=held_scan.end_reference,
    )
    held_report = report_from(loaded, scan, keep=report.keep, alpha=report.alpha)
    recipe_held = predict(loaded, held_report, recipe)
    no_ignore = replace(recipe, ignore=recipe.ignore[:1])  # only lm_head
    seconds["isoscope_held_out"] = time.perf_counter() - t0

    folder = Path(loaded.weights_dir)
    tokenized = tokenize(loaded, tuple(calib), args.max_length)  # isoscope's own tokenization
    dataset = Dataset.from_dict(
        {
            "input_ids": [ids.tolist() for ids in tokenized.input_ids],
            "attention_mask": [[1] * len(ids) for ids in tokenized.input_ids],
        }
    )
    ids, mask = scan.end_ids, scan.end_mask
    fp = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        reference = torch.log_softmax(
            fp(input_ids=ids, attention_mask=mask.long()).logits.float()[mask], dim=-1
        )

    measured, models = {}, {}
    tmp = Path(tempfile.mkdtemp())
    for name, r in (("recipe", recipe), ("without_ignore", no_ignore)):
        t0 = time.perf_counter()
        path = tmp / f"{name}.yaml"
        path.write_text(r.yaml())
        model = copy.deepcopy(fp)
        model = oneshot(
            model=model,
            dataset=dataset,
            recipe=str(path),
            max_seq_length=args.max_length,
            num_calibration_samples=len(calib),
            shuffle_calibration_samples=False,
        )
        model.eval()
        measured[name] = held_out_kl(model, reference, ids, mask)
        models[name] = model
        seconds[f"oneshot_{name}"] = time.perf_counter() - t0

    # real per-block error: the full-precision model with only block i from the quantized one
    t0 = time.perf_counter()
    quantized = models["without_ignore"]
    real_blocks = []
    layers = fp.model.layers
    for i in range(len(layers)):
        original = layers[i]
        layers[i] = quantized.model.layers[i]
        try:
            real_blocks.append(held_out_kl(fp, reference, ids, mask))
        finally:
            layers[i] = original
    seconds["per_block"] = time.perf_counter() - t0
    predicted_blocks = [r["end"] for r in held_report.sensitivity]
    p = recipe_held.predicted
    out = {
        "model": "smollm2",
        "calibration_texts": len(calib),
        "held_out_texts": int(ids.shape[0]),
        "held_out_tokens": int(mask.sum()),
        "max_length": args.max_length,
        "alpha": recipe.alpha,
        "ignored_blocks": recipe.ignored_layers,
        "mappings": len(recipe.mappings),
        "predicted": {
            "recipe": p["recipe"],
            "without_ignore": p["without_ignore"],
            "ignore_gain": p["without_ignore"] - p["recipe"],
            "per_token_every_site": p["per_token"],
        },
        "measured": {
            **measured,
            "ignore_gain": measured["without_ignore"] - measured["recipe"],
        },
        "per_block": {
            "predicted": predicted_blocks,
            "measured": real_blocks,
            "spearman": spearman(predicted_blocks, real_blocks),
            "top3_predicted": [int(i) for i in np.argsort(predicted_blocks)[::-1][:3]],
            "top3_measured": [int(i) for i in np.argsort(real_blocks)[::-1][:3]],
        },
        "seconds": seconds,
        "load_average": os.getloadavg()[0],
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
