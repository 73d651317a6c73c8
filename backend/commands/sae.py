"""``isoscope sae``: a released sparse autoencoder against the geometry of one model on one corpus
(docs/methods.md section 16): fidelity by token kind, the features that carry each outlier and
massive dimension, dense and dead features. The SAE's encoder runs on the states the extraction
streams, in its one forward pass."""

from __future__ import annotations

import argparse

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
    p.set_defaults(func=run_sae_command)


def run_sae_command(args: argparse.Namespace) -> int:
    from isoscope.analysis.sae.load import load_sae, on_model
    from isoscope.analysis.sae.params import SaeSettings
    from isoscope.analysis.sae.scan import run_sae
    from isoscope.engine.inputs.corpus import load_corpus_file

    out = check_out_path(args.out)
    settings = SaeSettings.from_args(args)  # before any model loads
    corpus = load_corpus_file(args.texts)
    sae = load_sae(args.sae, progress=DownloadPrinter(args.sae))
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
    return 0
