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

``--family qwen3_5_text`` (any family of tests/zoo_recent.py) runs the same on a tiny random
causal LM of a recent family built on the spot (a hybrid: Gated DeltaNet + attention, its gated
norms and in_proj / out_proj sites in the recipe); ``--model`` names any other checkpoint.
Blocks are swapped through ``isoscope.engine.arch.blocks_of``, whatever the family.

Needs the optional ``quant`` group (``pip install "isoscope[quant]"``: llmcompressor, which pins
transformers<=5.17, so use its own environment). ``--dry-run`` runs isoscope's side only (scan,
recipe, held-out prediction, the calibration set llm-compressor would get) and needs neither.
Usage: ``python benchmarks/quant_real.py [--model smollm2 | --family qwen3_5_text] [--texts 64]
[--held-out 32] [--max-length 128] [--end-tokens 1024] [--dry-run]``.
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
from isoscope.engine.environment import use_offline_environment  # noqa: E402

use_offline_environment()


def held_out_kl(model, reference, ids, mask) -> float:
    """isoscope's end metric with the real models: KL(p_full || p_quant) per position, mean."""
    import torch

    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask.long()).logits.float()[mask]
    q = torch.log_softmax(logits, dim=-1)
    return float((reference.exp() * (reference - q)).sum(-1).double().mean())


def family_checkpoint(family: str, folder: Path) -> Path:
    """A seeded tiny random causal LM of ``family`` (tests/zoo_recent.py) with the zoo's
    tokenizer, saved to ``folder`` (safetensors)."""
    import torch
    from transformers import AutoModelForCausalLM

    from tests import zoo_recent
    from tests.zoo import tokenizer

    if family not in zoo_recent.FAMILIES:
        raise SystemExit(
            f"error: unknown family {family!r}; one of {', '.join(zoo_recent.FAMILIES)}"
        )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(zoo_recent.config_of(family))
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer().save_pretrained(folder)
    return folder


def swap_block(model, source, i: int):
    """Put block ``i`` of ``source`` into ``model`` (the same family); returns the block it
    replaced, to put back."""
    from isoscope.engine.arch import blocks_of

    _, blocks = blocks_of(model)
    _, theirs = blocks_of(source)
    original = blocks[i]
    blocks[i] = theirs[i]
    return original


def swap_block_back(model, original, i: int) -> None:
    from isoscope.engine.arch import blocks_of

    blocks_of(model)[1][i] = original


def prepare(model: str, args) -> dict:
    """isoscope's side: the scan and recipe on the calibration texts, the prediction on the
    held-out texts, and the calibration set (isoscope's own tokenization) for llm-compressor."""
    from quant import corpus_texts

    from isoscope.analysis.quant.readiness import analyse, report_from, scan_sites
    from isoscope.analysis.quant.recipe import build_recipe, predict
    from isoscope.engine.extraction import tokenize
    from isoscope.engine.load.models import load_model

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    texts = corpus_texts(args.texts + args.held_out, args.max_length)
    calib, held = texts[: args.texts], texts[args.texts :]
    loaded = load_model(model, device="cpu")
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
    seconds["isoscope_held_out"] = time.perf_counter() - t0
    tokenized = tokenize(loaded, tuple(calib), args.max_length)
    calibration = {
        "input_ids": [ids.tolist() for ids in tokenized.input_ids],
        "attention_mask": [[1] * len(ids) for ids in tokenized.input_ids],
    }
    return {
        "loaded": loaded,
        "calib": calib,
        "recipe": recipe,
        "no_ignore": replace(recipe, ignore=recipe.ignore[:1]),  # only lm_head
        "recipe_held": recipe_held,
        "held_report": held_report,
        "scan": scan,
        "calibration": calibration,
        "seconds": seconds,
    }


def predicted(prep: dict) -> dict:
    p = prep["recipe_held"].predicted
    return {
        "recipe": p["recipe"],
        "without_ignore": p["without_ignore"],
        "ignore_gain": p["without_ignore"] - p["recipe"],
        "per_token_every_site": p["per_token"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--model", default="smollm2", help="the checkpoint (default: smollm2)")
    which.add_argument("--family", default=None, help="a tiny random tests/zoo_recent.py family")
    parser.add_argument("--texts", type=int, default=64, help="calibration (scanned) texts")
    parser.add_argument("--held-out", type=int, default=32, help="held-out texts for the KL")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--end-tokens", type=int, default=1024, help="held-out tokens measured")
    parser.add_argument("--dry-run", action="store_true", help="isoscope's side only")
    args = parser.parse_args(argv)
    model_name = args.model
    if args.family is not None:
        model_name = str(family_checkpoint(args.family, Path(tempfile.mkdtemp()) / args.family))
    if not args.dry_run:
        try:
            from datasets import Dataset
            from llmcompressor import oneshot
        except ImportError as exc:
            raise SystemExit(
                f"error: {exc}; this benchmark needs the optional quant group "
                '(pip install "isoscope[quant]", in its own environment), or --dry-run'
            ) from None
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from isoscope.analysis.quant.readiness import spearman

    prep = prepare(model_name, args)
    loaded, recipe, scan, seconds = prep["loaded"], prep["recipe"], prep["scan"], prep["seconds"]
    summary = {
        "model": args.family or args.model,
        "calibration_texts": len(prep["calib"]),
        "held_out_texts": int(scan.end_ids.shape[0]),
        "held_out_tokens": int(scan.end_mask.sum()),
        "max_length": args.max_length,
        "alpha": recipe.alpha,
        "ignored_blocks": recipe.ignored_layers,
        "mappings": len(recipe.mappings),
        "sites_not_smoothed": sum("not_smoothed" in row for row in recipe.coverage),
        "predicted": predicted(prep),
    }
    if args.dry_run:
        print(json.dumps(summary | {"recipe_yaml": recipe.yaml(), "seconds": seconds}, indent=2))
        return
    calib, no_ignore = prep["calib"], prep["no_ignore"]
    held_report = prep["held_report"]
    dataset = Dataset.from_dict(prep["calibration"])
    folder = Path(loaded.weights_dir)
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
    for i in range(int(loaded.info.num_layers)):
        original = swap_block(fp, quantized, i)
        try:
            real_blocks.append(held_out_kl(fp, reference, ids, mask))
        finally:
            swap_block_back(fp, original, i)
    seconds["per_block"] = time.perf_counter() - t0
    predicted_blocks = [r["end"] for r in held_report.sensitivity]
    out = {
        **summary,
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
