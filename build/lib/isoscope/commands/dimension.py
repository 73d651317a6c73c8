"""``isoscope dimension``: the card of one dimension (or a direction) at one hidden state: where it
shows, what writes it, what reads it, what it does (docs/methods.md, "One dimension, explained";
:mod:`isoscope.analysis.dimension`)."""

from __future__ import annotations

import argparse

from isoscope.analysis.dimension.params import (
    ABLATION_TEXTS,
    BATCH_SIZE,
    CONTEXT,
    CONTROLS,
    MAX_LENGTH,
    TOP_K,
)
from isoscope.commands.common import (
    ProgressPrinter,
    add_model_args,
    check_out_path,
    load_model_from_args,
    progress_line,
    write_json,
)
from isoscope.engine.params import SEED


def add_parser(sub) -> None:
    p = sub.add_parser(
        "dimension",
        help="the card of one dimension or direction: where it shows, what writes and reads it",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Writes {model, title, state, dim, offset, width, is_decoder, corpus: {texts, "
        "tokens}, top_tokens: [{end, text, position, token, value, context}], histogram, "
        "by_kind, by_position, by_state, contributions: [{layer, component, head | expert | norm, "
        "mean, first_position, other_positions, at_top}], sum_check, value_scale, readers: "
        "[{norm, role, layer, gamma, beta, projections: [{projection, column_norm, "
        "median_column, ratio}]}], qk_share: [{layer, head, share}], logit_effect: {promotes, "
        "suppresses} (decoders; null "
        "otherwise), ablation: {texts, metric, zero, mean, controls, controls_mean} (null with "
        "--ablation-texts 0), geometry, notes}. Layer 0 is the embeddings; text and position "
        "count from 0.",
    )
    add_model_args(p, max_length=MAX_LENGTH, batch_size=BATCH_SIZE)
    p.add_argument("--texts", required=True, help=".txt (one text per line), .csv or .jsonl")
    p.add_argument("--state", required=True, help="hidden state: emb, 0..L, or -1 for the last one")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--dim", type=int, help="the dimension (0-based)")
    which.add_argument(
        "--direction", metavar="FILE.npy", help="a direction u instead: one 1-D .npy vector"
    )
    p.add_argument(
        "--offset",
        type=float,
        default=0.0,
        help="a constant added to h . u (an SAE feature's b_enc - W_enc[f] . b_dec)",
    )
    TOP_K.add_argument(p)
    CONTEXT.add_argument(p)
    ABLATION_TEXTS.add_argument(p)
    CONTROLS.add_argument(p)
    SEED.add_argument(p, help="seed of the random control dimensions and the token sample")
    p.add_argument("--out", required=True, help="output JSON file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from isoscope.analysis.dimension import DimensionSettings, dimension_card, read_direction
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.naming import parse_hidden_state

    out = check_out_path(args.out)
    direction = read_direction(args.direction) if args.direction else None
    check = dict(
        top_k=args.top_k,
        context=args.context,
        max_length=args.max_length,
        batch_size=args.batch_size,
        ablation_texts=args.ablation_texts,
        controls=args.controls,
        seed=args.seed,
        offset=args.offset,
    )
    DimensionSettings(state=0, dim=args.dim, direction=direction, **check)  # before the model
    corpus = load_corpus_file(args.texts)
    loaded = load_model_from_args(args, corpus=corpus, max_length=args.max_length)
    try:
        state = parse_hidden_state(args.state, loaded.info.num_layers)
    except ValueError as exc:
        raise InputError(f"--state: {exc}") from None
    label = "" if direction is None else f"direction {args.direction}"
    settings = DimensionSettings(
        state=state, dim=args.dim, direction=direction, label=label, **check
    )
    card = dimension_card(
        loaded, corpus.texts, settings, progress=ProgressPrinter(f"reading {len(corpus)} texts")
    )
    for note in card.notes:
        progress_line(f"note: {note}")
    biggest = max(card.contributions, key=lambda r: abs(r["mean"]), default=None)
    if biggest is not None:
        progress_line(
            f"{card.title} at state {card.state_names[card.state]}: largest writer layer "
            f"{biggest['layer']} {biggest['component']} (mean {biggest['mean']:.4g}); parts sum "
            f"to the value within {card.sum_check:.2g}"
        )
    payload = {"model": loaded.info.to_dict(), "corpus_name": corpus.name} | card.to_dict()
    write_json(out, payload)
    return 0
