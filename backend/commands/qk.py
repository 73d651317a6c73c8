"""``isoscope qk``: Godey et al.'s queries and keys per layer and query head (the drift of the mean
query and key, their cosine, attention entropy), with the key head each query head uses under
grouped-query attention and the rotary embedding applied or not (Su et al. 2021)."""

from __future__ import annotations

import argparse

from isoscope.analysis.positional.params import QK_BATCH_SIZE, QK_MAX_LENGTH
from isoscope.commands.common import (
    ProgressPrinter,
    add_model_args,
    check_out_path,
    load_model_from_args,
    progress_line,
    write_json,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "qk",
        help="queries and keys per head: mean q/k norms, their cosine, attention entropy",
        description="Writes {model, corpus, settings: {rotation, capture, mask, num_heads, "
        "num_kv_heads, layers (the softmax-attention layers analysed), other_layers (the others, "
        "with their kind: a hybrid's Mamba, Gated DeltaNet, ... layers)}, heads: [{layer, head, "
        "kv_head, mean_q_norm, mean_k_norm, cos_qk, entropy, "
        "entropy_norm}]}. Layers count from 1, heads from 0; kv_head is the key head the query "
        "head attends with (floor(head / (H / G)) under grouped-query attention). Entropy is in "
        "nats under the model's own mask; entropy_norm divides it by log(number of keys). A model "
        "with no softmax attention (Mamba, RWKV) is refused in one line naming its layer kind.",
    )
    add_model_args(p, max_length=QK_MAX_LENGTH, batch_size=QK_BATCH_SIZE)
    p.add_argument("--texts", required=True, help=".txt (one text per line), .csv or .jsonl")
    p.add_argument(
        "--rotation",
        choices=("applied", "before"),
        default="applied",
        help="rotary models: queries/keys as the attention multiplies them (applied) or before "
        "the rotary embedding turns them (before); ignored without rotary positions",
    )
    p.add_argument("--out", required=True, help="output JSON file")
    p.set_defaults(func=run_qk)


def run_qk(args: argparse.Namespace) -> int:
    from isoscope.analysis.positional.qk import METRICS, qk_stats
    from isoscope.engine.extraction.media import check_modality
    from isoscope.engine.inputs.corpus import load_corpus_file

    out = check_out_path(args.out)
    for param in (QK_MAX_LENGTH, QK_BATCH_SIZE):  # before any model loads
        param.check(getattr(args, param.name), param.flag)
    corpus = load_corpus_file(args.texts)
    loaded = load_model_from_args(args)
    check_modality(loaded, "text")
    stats = qk_stats(
        loaded,
        corpus.texts,
        max_length=args.max_length,
        batch_size=args.batch_size,
        rotation=args.rotation,
        progress=ProgressPrinter(f"queries and keys of {len(corpus)} texts"),
    )
    rows = stats.frame().drop(columns="model").to_dict(orient="records")
    heads = [
        {"layer": int(r["layer"]), "head": int(r["head"]), "kv_head": int(r["kv_head"])}
        | {k: float(r[k]) for k in METRICS}
        for r in rows
    ]
    if stats.other_layers:
        progress_line(
            "softmax-attention layers analysed: "
            + ", ".join(map(str, stats.layer_numbers))
            + "; the others: "
            + ", ".join(f"{k} ({v})" for k, v in stats.other_layers.items())
        )
    progress_line(
        f"{stats.cos_qk.shape[0]} layers x {stats.cos_qk.shape[1]} query heads "
        f"({stats.num_kv_heads} key heads), rotation: {stats.rotation}; "
        f"mean cos(mean q, mean k): {stats.cos_qk.mean():.3f}"
    )
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "corpus": {
                "name": corpus.name,
                "sha": corpus.sha,
                "texts": len(corpus),
                "tokens": stats.num_tokens,
                "max_length": args.max_length,
            },
            "settings": stats.settings(),
            "heads": heads,
        },
    )
    return 0
