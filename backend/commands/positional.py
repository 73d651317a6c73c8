"""``isoscope positional`` (position probe + TUPE self-test) and ``isoscope nope``
(Chi et al.'s variance lab on random NoPE models)."""

from __future__ import annotations

import argparse

from backend.commands.common import (
    ProgressPrinter,
    add_cache_args,
    add_model_args,
    check_out_path,
    load_and_extract,
    progress_line,
    settings_from_args,
    write_json,
)
from backend.engine.params import SAMPLE_SIZE, SEED


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
    p.add_argument(
        "--test-fraction", type=float, default=0.2, help="share of texts held out for the probe"
    )
    p.add_argument(
        "--probe-iter", type=int, default=30, help="L-BFGS iterations of the probe per hidden state"
    )
    p.add_argument(
        "--tupe-texts", type=int, default=32, help="texts decomposed for the TUPE term shares"
    )
    add_cache_args(p)
    p.set_defaults(func=run_positional)

    n = sub.add_parser(
        "nope",
        help="Chi et al.: attention-output variance vs position in random models without position embeddings",
    )
    n.add_argument("--d-model", type=int, default=256, help="model width d")
    n.add_argument("--layers", type=int, default=4)
    n.add_argument("--heads", type=int, default=4)
    n.add_argument("--seq-len", type=int, default=512)
    n.add_argument("--seeds", type=int, default=3, help="random models (and inputs) averaged over")
    n.add_argument("--batch", type=int, default=2, help="random sequences per seed")
    n.add_argument("--init-std", type=float, default=0.02, help="initializer_range (GPT-2 init)")
    n.add_argument(
        "--inputs",
        default="tokens",
        help="tokens (random ids through the random embedding) | gaussian (random inputs_embeds)",
    )
    n.add_argument(
        "--fit-from", type=int, default=4, help="first position (1-based) of the log-log slope fit"
    )
    n.add_argument(
        "--bidirectional", action="store_true", help="no causal mask (the flat contrast)"
    )
    n.add_argument("--out", required=True, help="output JSON file")
    n.set_defaults(func=run_nope)


def run_positional(args: argparse.Namespace) -> int:
    from backend.analysis.positional.table import ProbeSettings, probe_result
    from backend.analysis.positional.tupe import supports_tupe, tupe_summary
    from backend.engine.corpus import load_corpus_file
    from backend.engine.errors import InputError

    out = check_out_path(args.out)
    if args.tupe_texts < 1:
        raise InputError("--tupe-texts must be at least 1")
    corpus = load_corpus_file(args.texts)
    settings = settings_from_args(args)
    probe_settings = ProbeSettings(
        max_position=args.max_length,
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
    from backend.analysis.positional.nope import NopeSettings, variance_lab

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
