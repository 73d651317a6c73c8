"""``isoscope positional`` (position probe + TUPE self-test) and ``isoscope nope``
(Chi et al.'s variance lab on random NoPE models)."""

from __future__ import annotations

import argparse

from isoscope.analysis.positional.params import (
    MAX_POSITION,
    NOPE_BATCH,
    NOPE_D_MODEL,
    NOPE_FIT_FROM,
    NOPE_HEADS,
    NOPE_INIT_STD,
    NOPE_LAYERS,
    NOPE_SEEDS,
    NOPE_SEQ_LEN,
    PROBE_ITER,
    TEST_FRACTION,
    TUPE_TEXTS,
)
from isoscope.commands.common import (
    ProgressPrinter,
    add_cache_args,
    add_model_args,
    check_out_path,
    load_and_extract,
    progress_line,
    settings_from_args,
    write_json,
)
from isoscope.engine.params import SAMPLE_SIZE, SEED


def add_parser(sub) -> None:
    p = sub.add_parser(
        "positional", help="position probe per hidden state and the TUPE decomposition self-test"
    )
    add_model_args(p)
    p.add_argument(
        "--texts", required=True, help=".txt (one text per line), .csv or .jsonl with a text column"
    )
    p.add_argument("--out", required=True, help="output JSON file")
    SEED.add_argument(p, help="seed of the token sample and the train/held-out text split")
    SAMPLE_SIZE.add_argument(p, help="token vectors the probe trains and tests on")
    MAX_POSITION.add_argument(p)
    TEST_FRACTION.add_argument(p)
    PROBE_ITER.add_argument(p)
    TUPE_TEXTS.add_argument(p)
    add_cache_args(p)
    p.set_defaults(func=run_positional)

    n = sub.add_parser(
        "nope",
        help="Chi et al.: attention-output variance vs position in random models without position embeddings",
    )
    for param in (NOPE_D_MODEL, NOPE_LAYERS, NOPE_HEADS, NOPE_SEQ_LEN, NOPE_SEEDS, NOPE_BATCH):
        param.add_argument(n)
    NOPE_INIT_STD.add_argument(n)
    n.add_argument(
        "--inputs",
        default="tokens",
        help="tokens (random ids through the random embedding) | gaussian (random inputs_embeds)",
    )
    NOPE_FIT_FROM.add_argument(n)
    n.add_argument(
        "--bidirectional", action="store_true", help="no causal mask (the flat contrast)"
    )
    n.add_argument("--out", required=True, help="output JSON file")
    n.set_defaults(func=run_nope)


def run_positional(args: argparse.Namespace) -> int:
    from isoscope.analysis.positional.table import ProbeSettings, probe_result
    from isoscope.analysis.positional.tupe import supports_tupe, tupe_summary
    from isoscope.engine.inputs.corpus import load_corpus_file

    out = check_out_path(args.out)
    TUPE_TEXTS.check(args.tupe_texts, TUPE_TEXTS.flag)
    corpus = load_corpus_file(args.texts)
    settings = settings_from_args(args)
    probe_settings = ProbeSettings(
        max_position=args.max_position,
        test_fraction=args.test_fraction,
        seed=args.seed,
        max_iter=args.probe_iter,
    )
    loaded, result = load_and_extract(args, corpus, settings, exclude_first=False)
    probe = probe_result(result, probe_settings, ProgressPrinter("position probe"))
    reason = supports_tupe(loaded)
    tupe = None
    if reason is None:
        summary = tupe_summary(
            loaded,
            corpus.texts,
            args.max_length,
            args.tupe_texts,
            ProgressPrinter("TUPE decomposition"),
        )
        tupe = summary.to_dict()
        progress_line(f"TUPE self-test: max |terms - real logits| = {summary.max_abs_error:.2e}")
    else:
        progress_line(f"note: no TUPE decomposition: {reason}")
    write_json(
        out,
        {
            "model": dict(result.model),
            "state_names": result.state_names,
            "probe_accuracy": probe.accuracy.tolist(),
            "probe": probe.to_dict(),
            "tupe": tupe,
        },
    )
    return 0


def run_nope(args: argparse.Namespace) -> int:
    from isoscope.analysis.positional.nope import NopeSettings, variance_lab

    out = check_out_path(args.out)
    settings = NopeSettings(
        d_model=args.d_model,
        layers=args.layers,
        heads=args.heads,
        seq_len=args.seq_len,
        seeds=args.seeds,
        batch=args.batch,
        init_std=args.init_std,
        inputs=args.inputs,
        bidirectional=args.bidirectional,
        fit_from=args.fit_from,
    )
    curves = variance_lab(settings, ProgressPrinter("random models"))
    slopes = ", ".join(f"{s:+.3f}" for s in curves.slopes)
    progress_line(
        "log-log slopes of the attention-output variance per layer "
        f"(positions {curves.fit_range[0]}..{curves.fit_range[1]}): {slopes}"
    )
    write_json(out, curves.to_dict())
    return 0
