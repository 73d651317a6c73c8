"""``isoscope sae``: a released sparse autoencoder against the geometry of one model on one corpus
(docs/methods.md section 16): fidelity by token kind, the features that carry each outlier and
massive dimension, dense and dead features. The SAE's encoder runs on the states the extraction
streams, in its one forward pass."""

from __future__ import annotations

import argparse

from isoscope.analysis.dimension.params import ABLATION_TEXTS, BATCH_SIZE
from isoscope.analysis.sae.params import (
    DENSE_SHARE,
    DIM_TOKENS,
    FEATURES_PER_DIM,
    SAE_BATCH_SIZE,
    SAE_MAX_LENGTH,
    TOP_TOKENS,
    WORST_TOKENS,
)
from isoscope.commands.common import (
    DownloadPrinter,
    ProgressPrinter,
    add_model_args,
    check_out_path,
    load_model_from_args,
    progress_line,
    write_json,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sae",
        help="a sparse autoencoder's features against the outlier and massive dimensions",
        description="Writes {model, corpus, state (the isoscope state the SAE reads: emb, 1..L), "
        "state_index, sae: {source, format, activation, k, width, d_in, hook, normalise, "
        "input_scale, subtract_b_dec, model_name, neuronpedia_id}, tokens, median_abs, massive_threshold, "
        "fidelity: {first_position, massive, special, ordinary, all: {fvu, l0, tokens}}, "
        "worst_tokens: [{row, text, position, token, context, kind, relative_error, norm, l0}], "
        "dimensions: [{dim, kinds (outlier / massive), features: [{feature, loading, "
        "frequency}] (largest |loading| first), kept, mean_abs_large, mean_abs_reconstructed, "
        "large_tokens}], features: [{feature, frequency, mean_activation}] (those that fired, "
        "most frequent first), dense: [{feature, frequency, cos_mean, cos_pcs}], dead: {count, "
        "features}, top_tokens: {feature: [{row, text, position, token, context, activation}]} "
        "(the features of dimensions and dense ones), notes}. Every token is read: first "
        "position and special tokens included.",
    )
    p.add_argument(
        "--sae",
        required=True,
        help="a local folder holding one SAE (Gemma Scope params.safetensors, SAELens cfg.json + "
        "sae_weights.safetensors, sparsify cfg.json + sae.safetensors), a Hub id plus the "
        "SAE's path in the repo: org/name[@revision]/path/in/repo, or saelens:RELEASE:SAE_ID "
        "(SAELens's release directory, where SAELens is installed)",
    )
    p.add_argument(
        "--state",
        type=int,
        default=None,
        help="the hidden state the SAE reads (0 = emb, i = layer i's output) when its files do "
        "not say (default: from its files)",
    )
    add_model_args(p, max_length=SAE_MAX_LENGTH, batch_size=SAE_BATCH_SIZE)
    p.add_argument("--texts", required=True, help=".txt (one text per line), .csv or .jsonl")
    for param in (DENSE_SHARE, FEATURES_PER_DIM, DIM_TOKENS, TOP_TOKENS, WORST_TOKENS):
        param.add_argument(p)
    p.add_argument("--out", required=True, help="output JSON file")
    card = p.add_argument_group(
        "a feature's card",
        "the dimension card (as `isoscope dimension` writes it) of one feature's pre-activation "
        "u . h + offset at the state the SAE reads, in place of h[:, d]; it decomposes the "
        "pre-activation, not the ReLU / TopK / JumpReLU activation that follows",
    )
    card.add_argument(
        "--feature", type=int, default=None, help="the feature (0-based) whose card to write"
    )
    card.add_argument(
        "--card-out",
        default=None,
        metavar="CARD.json",
        help="where the feature's card goes (with --feature)",
    )
    ABLATION_TEXTS.add_argument(
        card,
        help="texts the card's ablation runs on (each ablation is a forward pass over them; "
        "0: no ablation)",
    )
    p.set_defaults(func=run_sae_command)


def run_sae_command(args: argparse.Namespace) -> int:
    from isoscope.analysis.sae.load import load_sae, on_model
    from isoscope.analysis.sae.params import SaeSettings
    from isoscope.analysis.sae.scan import run_sae
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.corpus import load_corpus_file

    out = check_out_path(args.out)
    if (args.feature is None) != (args.card_out is None):
        raise InputError("--feature and --card-out go together: give both for a feature's card")
    card_out = check_out_path(args.card_out, "--card-out") if args.card_out else None
    ABLATION_TEXTS.check(args.ablation_texts, "--ablation-texts")
    settings = SaeSettings.from_args(args)  # before any model loads
    corpus = load_corpus_file(args.texts)
    sae = load_sae(args.sae, progress=DownloadPrinter(args.sae))
    if args.feature is not None and not 0 <= args.feature < sae.width:
        raise InputError(
            f"--feature {args.feature}: the SAE has features 0 to {sae.width - 1}; pick one of them"
        )
    loaded = load_model_from_args(args)
    on = on_model(sae, loaded, settings.state)
    progress_line(
        f"SAE: {sae.format} · {sae.activation}{f' k={sae.k}' if sae.k else ''} · "
        f"{sae.width:,} features · reads state {on.state_name} ({sae.hook or 'as given'})"
    )
    for note in on.notes:
        progress_line(f"note: {note}")
    reading, result = run_sae(
        loaded, corpus, on, settings, ProgressPrinter(f"encoding {len(corpus)} texts")
    )
    ordinary = reading.fidelity["ordinary"]
    if ordinary["fvu"] is not None:
        progress_line(
            f"ordinary tokens: FVU {ordinary['fvu']:.3f}, L0 {ordinary['l0']:.1f}; "
            f"{len(reading.dense)} dense and {len(reading.dead):,} dead features"
        )
    shown = {f["feature"] for d in reading.dimensions for f in d["features"]}
    shown |= {d["feature"] for d in reading.dense}
    write_json(
        out,
        {
            "model": loaded.info.to_dict(),
            "corpus": {
                "name": corpus.name,
                "sha": corpus.sha,
                "texts": len(corpus),
                "tokens": reading.n_tokens,
                "max_length": settings.max_length,
            },
            **reading.to_dict(),
            "top_tokens": {
                str(f): reading.top_tokens(f) for f in sorted(shown) if reading.frequency[f] > 0
            },
            "notes": [*result.notices, *reading.notes],
        },
    )
    if card_out is not None:
        write_feature_card(args, loaded, corpus, on, settings, card_out)
    return 0


def write_feature_card(args, loaded, corpus, on, settings, out) -> None:
    """``--card-out``: feature ``--feature``'s card in ``isoscope dimension``'s schema, plus
    ``sae`` (the source) and ``feature``."""
    from isoscope.analysis.sae.card import feature_card

    card = feature_card(
        loaded,
        corpus.texts,
        on.sae,
        on.state,
        args.feature,
        progress=ProgressPrinter(f"feature {args.feature}'s card over {len(corpus)} texts"),
        max_length=settings.max_length,
        batch_size=min(settings.batch_size, BATCH_SIZE.high),  # the card's own cap
        ablation_texts=args.ablation_texts,
    )
    progress_line(
        f"{card.title} at state {card.state_names[card.state]}: parts sum to the "
        f"pre-activation within {card.sum_check:.2g}"
    )
    payload = {"model": loaded.info.to_dict(), "corpus_name": corpus.name} | card.to_dict()
    write_json(out, payload | {"sae": args.sae, "feature": args.feature})
