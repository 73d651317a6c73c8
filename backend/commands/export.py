"""``isoscope export``: the token sample or mean-pooled texts at one hidden state, raw or
clipped, for the TensorBoard Embedding Projector or Apple's embedding-atlas (see :mod:`isoscope.share.export`)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from isoscope.commands.common import (
    ProgressPrinter,
    add_cache_args,
    add_exclude_first_arg,
    add_model_args,
    extract_with_cache,
    load_model_from_args,
    print_notices,
    progress_line,
    resolve_exclude_first,
    settings_from_args,
)
from isoscope.engine.params import SAMPLE_SIZE, SEED


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export",
        help="vectors + metadata for the Embedding Projector (TSV) or embedding-atlas (Parquet)",
    )
    add_model_args(p)
    p.add_argument(
        "--texts", required=True, help=".txt (one text per line), .csv or .jsonl with a text column"
    )
    p.add_argument(
        "--state", required=True, help="hidden state: emb (or 0) for the embeddings, 1..L a layer"
    )
    p.add_argument("--format", required=True, help="projector | atlas")
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    p.add_argument(
        "--clip",
        default="none",
        help="none | auto (zero the state's outlier dims) | D1,D2,... (0-based dims to zero)",
    )
    p.add_argument(
        "--points",
        default="token",
        help="token (the token sample) | text (mean-pooled texts) | all (every token: a second "
        "pass over the corpus; UMAP / t-SNE fitted on 10,000 landmarks; the projector keeps a "
        "seeded 100,000)",
    )
    p.add_argument(
        "--projection", default="pca", help="atlas x/y: pca | umap | tsne (seeded, see --seed)"
    )
    SEED.add_argument(p)
    SAMPLE_SIZE.add_argument(p, help="token vectors in the sample")
    add_exclude_first_arg(p)
    add_cache_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from isoscope.analysis.projections.methods import check_method
    from isoscope.analysis.similarity import parse_clip
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.naming import parse_hidden_state
    from isoscope.share.export import (
        check_format,
        check_points,
        export_every_token,
        export_points,
        write_export,
    )

    fmt = check_format(args.format)
    points = "all" if str(args.points).strip().lower() == "all" else check_points(args.points)
    projection = check_method(args.projection)
    parse_clip(args.clip)  # syntax first (range once the model is loaded)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {args.out!r} is a file; give a folder for the exported files")
    if not out.parent.exists():
        raise InputError(f"--out: folder {str(out.parent)!r} does not exist")
    corpus = load_corpus_file(args.texts)
    settings = settings_from_args(args)
    loaded = load_model_from_args(args)
    settings = replace(settings, exclude_first=resolve_exclude_first(args, loaded))
    try:
        state = parse_hidden_state(args.state, loaded.info.num_layers)
    except ValueError as exc:
        raise InputError(f"--state: {exc}") from None
    result = extract_with_cache(loaded, corpus, settings, args)
    print_notices(result)
    if points == "all":
        written, notices = export_every_token(
            loaded,
            result,
            state,
            out,
            fmt,
            args.clip,
            projection,
            args.seed,
            progress=ProgressPrinter("every token (texts of the second pass, then rows)"),
        )
        for line in [f"exported every token ({result.num_tokens:,}) of state {state}", *notices]:
            progress_line(line)
        for path in written:
            progress_line(f"wrote {path}")
        return 0
    exported = export_points(
        result,
        state,
        points=points,
        clip=args.clip,
        loaded=loaded,
        progress=ProgressPrinter(f"mean-pooling {len(corpus)} texts") if points == "text" else None,
    )
    written = write_export(exported, out, fmt, projection, args.seed)
    progress_line(f"exported {exported.description}")
    for path in written:
        progress_line(f"wrote {path}")
    return 0
