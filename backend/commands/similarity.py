"""``isoscope sts``: sentence-similarity Spearman x 100 per hidden state, raw vs clipped.

Luo, Kulmizev & Mao 2021 (arXiv 2011.04393), Table 2. Each sentence is mean-pooled at every hidden
state (all non-padding tokens, like sentence-transformers); the cosine of each pair is ranked
against the gold scores. ``--clip auto`` zeroes, per hidden state, its outlier dims (the headline
rule of :func:`isoscope.analysis.outliers.auto_clip_dims`, what "auto" means everywhere),
detected on an extraction of the evaluated sentences (through the result cache);
``--clip largest-mean`` zeroes the two dimensions with the largest |mean| over the evaluated texts'
pooled vectors; ``--clip 223,338`` zeroes those dims at every state; ``--clip none`` reports the
raw score as "clipped" too.
"""

from __future__ import annotations

import argparse

from isoscope.commands.common import (
    ProgressPrinter,
    add_cache_args,
    add_model_args,
    check_cache_args,
    check_out_path,
    extract_with_cache,
    load_model_from_args,
    progress_line,
    write_json,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sts", help="sentence similarity (Spearman x 100) per hidden state, raw vs clipped"
    )
    add_model_args(p)
    p.add_argument(
        "--pairs",
        required=True,
        help="CSV sentence1,sentence2,score (header line, or the header-less STS-B file)",
    )
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument(
        "--clip",
        default="auto",
        help="auto (each state's outlier dims, detected on the evaluated sentences) | "
        "largest-mean (2 largest-|mean| dims of the pooled vectors per state) | none | D1,D2,...",
    )
    p.add_argument(
        "--postprocess",
        default=None,
        help="also score after this post-processing fitted on each state's pooled vectors "
        "(none, clip, center, standardize, abtt, whiten); reported as 'processed'",
    )
    add_cache_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from isoscope.analysis.projections.postprocess import POSTPROCESSORS
    from isoscope.analysis.similarity import (
        clip_dims_by_state,
        parse_clip,
        pool_pairs,
        sts_by_state,
    )
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.pairs import read_pairs_csv

    out = check_out_path(args.out)
    check_cache_args(args)
    pairs = read_pairs_csv(args.pairs)
    clip = parse_clip(args.clip)
    post = args.postprocess
    if post is not None and post not in POSTPROCESSORS:
        raise InputError(
            f"unknown --postprocess {post!r}; choose one of: {', '.join(POSTPROCESSORS)}"
        )
    if post == "clip":
        raise InputError("--postprocess clip needs dims: use --clip D1,D2 instead")
    if args.max_length < 2:
        raise InputError(f"--max-length must be at least 2, got {args.max_length}")
    loaded = load_model_from_args(args)
    if isinstance(clip, list) and max(clip) >= loaded.info.hidden_size:
        raise InputError(
            f"--clip dimension {max(clip)} is out of range; the model has "
            f"{loaded.info.hidden_size} dims (0 to {loaded.info.hidden_size - 1})"
        )
    progress_line(f"{len(pairs)} pairs from {pairs.name}")
    first, second = pool_pairs(
        loaded, pairs, args.max_length, args.batch_size, ProgressPrinter("pooling sentences")
    )
    result = None
    if clip == "auto":  # the outlier dims of the evaluated sentences' hidden states
        from isoscope.engine.extraction import ExtractionSettings
        from isoscope.engine.inputs.corpus import Corpus
        from isoscope.engine.inputs.pairs import evaluated_texts

        sentences = evaluated_texts(pairs)
        settings = ExtractionSettings(max_length=args.max_length, batch_size=args.batch_size)
        result = extract_with_cache(loaded, Corpus(sentences, pairs.name), settings, args)
    dims = clip_dims_by_state(clip, first, second, result=result)
    states = sts_by_state(first, second, pairs.scores, dims, post)
    for row in states:
        progress_line(
            f"  {row['name']:>4}: raw {row['raw']:6.2f}  clipped {row['clipped']:6.2f}  dims {row['clipped_dims']}"
        )
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "pairs": {"name": pairs.name, "count": len(pairs)},
            "settings": {"clip": args.clip, "max_length": args.max_length, "postprocess": post},
            "states": states,
        },
    )
    return 0
