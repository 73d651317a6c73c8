"""``isoscope compare``: model A vs model B (or one model on two corpora) as JSON. ``--images`` /
``--audio`` compare two models on one image or audio folder (e.g. a checkpoint against its
``random-like:`` copy, Godey et al. 2023's contrast).

Writes ``{"a", "b": model cards, "cka": states(A) x states(B), "basis": "tokens" | "texts",
"states": [{"index", "anisotropy_a", "anisotropy_b", "outliers_a", "outliers_b", "gained",
"lost", ...}]}`` (see :func:`isoscope.analysis.compare.comparison.comparison_report`). Linear CKA after Kornblith et al.
2019 (arXiv 1905.00414).
"""

from __future__ import annotations

import argparse

from isoscope.commands.common import (
    add_cache_args,
    add_input_args,
    add_model_args,
    check_cache_args,
    check_out_path,
    extract_with_cache,
    load_inputs,
    load_model_from_args,
    model_source,
    progress_line,
    settings_from_args,
    write_json,
)
from isoscope.engine.params import SAMPLE_SIZE, SEED

DEBIASED = {"auto": None, "yes": True, "no": False}


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="model A vs model B on one corpus (CKA, anisotropy, outliers), or one model on two corpora",
    )
    p.add_argument(
        "--model-a",
        required=True,
        type=model_source,
        help="default | checkpoint folder | Hub id org/name[@rev] | random:FAMILY[:k=v,...] | random-like:SOURCE",
    )
    p.add_argument(
        "--model-b", default=None, type=model_source, help="the same choices; default: --model-a"
    )
    add_input_args(p, ".txt (one text per line), .csv or .jsonl with a text column")
    p.add_argument(
        "--texts-b",
        default=None,
        help="a second text corpus for B (one model on two corpora; CKA is then skipped)",
    )
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument(
        "--pairs",
        default=None,
        help="sentence1,sentence2,score CSV (as for `sts`): adds STS Spearman x 100 by state",
    )
    p.add_argument(
        "--debiased",
        choices=list(DEBIASED),
        default="auto",
        help="debiased CKA (unbiased HSIC) for small n; auto = on for the text basis only",
    )
    add_model_args(p, source=False)  # --model-a / --model-b name the models
    SAMPLE_SIZE.add_argument(p, help="token vectors kept for CKA and cosines")
    SEED.add_argument(p)
    add_cache_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from isoscope.analysis.compare.comparison import compare_with_cache, comparison_report
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.store.cache import ResultCache

    out = check_out_path(args.out)
    check_cache_args(args)
    if not args.texts and (args.texts_b or args.pairs):
        option = "--texts-b" if args.texts_b else "--pairs"
        raise InputError(
            f"{option} needs --texts: images and audio are compared model against model on one "
            "folder (--model-a, --model-b), with no sentence pairs"
        )
    model_b = args.model_b or args.model_a
    if model_b == args.model_a and not args.texts_b:
        progress_line("note: A and B are the same model on the same corpus (a self-comparison)")
    settings = settings_from_args(args)
    corpus_a = load_inputs(args)
    corpus_b = load_corpus_file(args.texts_b) if args.texts_b else corpus_a
    pairs = None
    if args.pairs:
        from isoscope.engine.inputs.pairs import read_pairs_csv

        pairs = read_pairs_csv(args.pairs)
        if len(pairs.scores) < 3:
            raise InputError(f"{args.pairs}: STS needs at least 3 sentence pairs")
    loaded_a = load_model_from_args(args, source=args.model_a)
    same_model = model_b == args.model_a
    loaded_b = loaded_a if same_model else load_model_from_args(args, source=model_b)
    result_a = extract_with_cache(loaded_a, corpus_a, settings, args, "A")
    same = loaded_b is loaded_a and corpus_b is corpus_a
    result_b = result_a if same else extract_with_cache(loaded_b, corpus_b, settings, args, "B")

    # The Compare page's cache entry too: either reopens what the other computed.
    cache = None if args.no_cache else ResultCache(args.cache_dir, args.cache_limit)
    comparison = compare_with_cache(
        cache,
        result_a,
        result_b,
        loaded_a=loaded_a,
        loaded_b=loaded_b,
        pairs=pairs,
        debiased=DEBIASED[args.debiased],
        seed=args.seed,
        inputs=None if corpus_a.kind == "text" else corpus_a.items,
    )
    for note in comparison.notes:
        progress_line(f"note: {note}")
    write_json(out, comparison_report(comparison))
    return 0
