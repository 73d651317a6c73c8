"""``isoscope massive``: massive activations (Sun et al. 2024), attention sinks (Xiao et
al. 2023; Gu et al. 2024's metric) and LLM.int8-style outlier features (Dettmers et al. 2022) of a
model on a corpus, in one pass over every token (first position included)."""

from __future__ import annotations

import argparse

from backend.commands.common import (
    ProgressPrinter,
    add_model_args,
    check_out_path,
    load_model_from_args,
    progress_line,
    write_json,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "massive",
        help="massive activations, attention sinks and int8-style outlier features",
        description="Writes {model, corpus, layers: [{index, name, median_abs, top: [{value, dim, "
        "position, token}], n_massive}], attention_sink: {alpha, share_per_layer, share}, int8: "
        "{dims: [{dim, site_share}], outlier_features}}. Positions count from 0 within each text.",
    )
    add_model_args(p, max_length=256, batch_size=8)
    p.add_argument(
        "--texts", required=True, help=".txt (one text per line), .csv or .jsonl with a text column"
    )
    p.add_argument("--out", required=True, help="output JSON file")
    p.set_defaults(func=run_massive)


def run_massive(args: argparse.Namespace) -> int:
    from backend.analysis.decoder.massive import peak_state, scan_decoder
    from backend.engine.corpus import load_corpus_file
    from backend.engine.errors import InputError

    out = check_out_path(args.out)
    if not 2 <= args.max_length <= 8192:
        raise InputError(f"--max-length must be between 2 and 8192, got {args.max_length}")
    if not 1 <= args.batch_size <= 4096:
        raise InputError(f"--batch-size must be between 1 and 4096, got {args.batch_size}")
    corpus = load_corpus_file(args.texts)
    loaded = load_model_from_args(args)
    for notice in corpus.notices:
        progress_line(f"note: {notice}")
    scan = scan_decoder(
        loaded,
        corpus.texts,
        max_length=args.max_length,
        batch_size=args.batch_size,
        progress=ProgressPrinter(f"scanning {len(corpus)} texts"),
    )
    for note in scan.notes:
        progress_line(f"note: {note}")
    massive = scan.massive
    peak = peak_state(massive)
    progress_line(
        f"largest |h|: {massive.top_value[peak, 0]:.1f} at hidden state {massive.state_names[peak]}, "
        f"dim {massive.top_dim[peak, 0]}, position {massive.top_position[peak, 0]}"
    )
    if scan.sinks is not None:
        progress_line(
            f"sink share (alpha > {scan.sinks.threshold:g}): {scan.sinks.share:.1%} of heads"
        )
    if scan.int8 is not None:
        progress_line(scan.int8.verdict())
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "corpus": {
                "name": corpus.name,
                "sha": corpus.sha,
                "texts": scan.n_texts,
                "tokens": scan.n_tokens,
                "max_length": scan.max_length,
            },
            "layers": massive.layers(),
            "attention_sink": scan.sinks.to_dict() if scan.sinks is not None else None,
            "int8": scan.int8.to_dict() if scan.int8 is not None else None,
        },
    )
    return 0
