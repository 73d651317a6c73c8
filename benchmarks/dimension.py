"""Seconds for one dimension card (no ablation) against one plain forward pass over the same texts.

Loads a model (default ``smollm2``, the bundled decoder), times a plain forward pass with hidden
states over the first ``--texts`` texts of the bundled corpus (as the card batches them), then the
card of ``--dim`` at ``--state``, best of ``--repeats`` each, and prints JSON with the ratio (the
target: at most 1.5) and the card's headline (largest writer, sum check).
Usage: ``python benchmarks/dimension.py [--model smollm2] [--texts 64] [--state 12] [--dim 507]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from isoscope.engine.environment import use_offline_environment  # noqa: E402 (after the path insert)

use_offline_environment()


def main() -> None:
    import torch

    from isoscope.analysis.dimension import DimensionSettings, dimension_card
    from isoscope.engine.budget.batching import plan_batches
    from isoscope.engine.environment import quiet_libraries
    from isoscope.engine.extraction import forward_hidden_states, pad_batch, pad_token_id, tokenize
    from isoscope.engine.inputs.corpus import bundled_corpus
    from isoscope.engine.load.models import load_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--state", type=int, default=12)
    parser.add_argument("--dim", type=int, default=507)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    quiet_libraries()
    loaded = load_model(args.model, device=args.device)
    texts = bundled_corpus().texts[: args.texts]
    tokenized = tokenize(loaded, texts, args.max_length)
    batches = plan_batches(tokenized.lengths, args.batch_size)
    pad_id = pad_token_id(loaded)

    def synchronize() -> None:
        if loaded.device.type == "cuda":
            torch.cuda.synchronize()

    def plain() -> float:
        started = time.perf_counter()
        with torch.inference_mode():
            for rows in batches:
                forward_hidden_states(loaded, *pad_batch(tokenized, rows, pad_id))
        synchronize()
        return time.perf_counter() - started

    settings = DimensionSettings(
        state=args.state,
        dim=args.dim,
        ablation_texts=0,
        max_length=args.max_length,
        batch_size=args.batch_size,
    )

    def card_once():
        started = time.perf_counter()
        card = dimension_card(loaded, texts, settings)
        synchronize()
        return time.perf_counter() - started, card

    plain()  # warm-up (kernels, allocator)
    card_once()
    forward_s = min(plain() for _ in range(args.repeats))
    runs = [card_once() for _ in range(args.repeats)]
    card_s = min(s for s, _ in runs)
    card = runs[-1][1]
    writer = max(card.contributions, key=lambda r: abs(r["first_position"] or 0.0))
    print(
        json.dumps(
            {
                "model": loaded.info.display_name,
                "device": loaded.info.device,
                "torch_threads": torch.get_num_threads(),
                "cpu_count": os.cpu_count(),
                "load_average": os.getloadavg()[0],
                "texts": len(texts),
                "tokens": int(tokenized.lengths.sum()),
                "state": args.state,
                "dim": args.dim,
                "forward_seconds": round(forward_s, 3),
                "card_seconds": round(card_s, 3),
                "card_over_forward": round(card_s / max(forward_s, 1e-9), 3),
                "target": 1.5,
                "sum_check": card.sum_check,
                "first_position_writer": {
                    k: writer.get(k) for k in ("layer", "component", "head", "first_position")
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
