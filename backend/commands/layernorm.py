"""``isoscope ablate``: zero LayerNorm dims (BERT Busters) and compare with random dims.

Writes ``{"dims", "ln_outliers", "effect": {"embedding_cosine", "mlm_loss", "mlm_loss_original",
...}, "random_controls": [{"dims", "effect"}, ...], ...}``. ``--dims auto`` ablates the detected
LayerNorm outlier dims. Checkpoints whose config names a masked-LM architecture are loaded with
their MLM head (so ``mlm_loss`` is measured); others load as base models (``mlm_loss`` null).
``--images`` / ``--audio`` ablate vision and speech encoders: no LM loss, no STS pairs; the end
metric is ``final_state_cosine`` (the unablated vs ablated mean-pooled final state).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from isoscope.analysis.layernorm.thresholds import LN_K, LN_SHARE, RANDOM_CONTROLS
from isoscope.commands.common import (
    ProgressPrinter,
    add_input_args,
    add_model_args,
    check_out_path,
    load_inputs,
    load_model_from_args,
    progress_line,
    read_pairs,
    write_json,
)
from isoscope.engine.params import SEED


def add_parser(sub) -> None:
    p = sub.add_parser("ablate", help="disable LayerNorm outlier dims and compare with random dims")
    add_model_args(p)
    add_input_args(p, ".txt (one text per line), .csv or .jsonl with a text column")
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument(
        "--dims",
        default="auto",
        help="auto (detected LayerNorm outlier dims) or D1,D2,... (0-based)",
    )
    RANDOM_CONTROLS.add_argument(p)
    SEED.add_argument(p, help="seed of the MLM masks, the controls and the token sample")
    p.add_argument(
        "--norms",
        default=None,
        help="LayerNorms to ablate: roles or names, comma-separated (default: the output LN of every "
        "layer; pre-LN models: pre_attn,pre_mlp). Roles: emb, attn, out, pre_attn, pre_mlp, final, head",
    )
    p.add_argument(
        "--include-head", action="store_true", help="also ablate the MLM head's LayerNorm (head.ln)"
    )
    LN_K.add_argument(p)
    LN_SHARE.add_argument(p)
    p.add_argument(
        "--pairs", default=None, help="optional CSV with sentence1,sentence2,score for STS Spearman"
    )
    p.set_defaults(func=run)


if TYPE_CHECKING:
    from isoscope.engine.load.models import LoadedModel


def _load_with_mlm_head(args: argparse.Namespace) -> LoadedModel | None:
    """The model with its MLM head (for the masked-token loss), or None with a note when the
    head cannot be loaded."""
    from isoscope.engine.errors import ModelLoadError

    try:
        return load_model_from_args(args, head="mlm")
    except ModelLoadError as exc:
        progress_line(f"note: cannot load the MLM head ({exc}); using the base model")
        return None


def _chosen_norms(args: argparse.Namespace, loaded: LoadedModel) -> list[str] | None:
    """``--norms`` (and ``--include-head``) checked against the model's LayerNorms before any
    work: None means the default (every layer's output LN)."""
    from isoscope.analysis.layernorm.params import norms_of, select_norms
    from isoscope.engine.errors import InputError

    sites = norms_of(loaded)  # UnsupportedModelError (exit 2) for a model without LayerNorms
    norms = [n.strip() for n in args.norms.split(",") if n.strip()] if args.norms else None
    if args.include_head:
        if not any(s.role == "head" for s in sites):
            raise InputError(
                "--include-head: this model has no MLM head LayerNorm (load a *ForMaskedLM checkpoint)"
            )
        norms = (norms or [s.name for s in select_norms(sites, None)]) + ["head"]
    select_norms(sites, norms)  # unknown names fail here, before any work
    return norms


def _payload(report, detection, loaded, corpus) -> dict:
    """The JSON of the command: the report, the LayerNorm detection, the model and the corpus,
    with dims, outliers, effect and controls first."""
    payload = report.to_json()
    payload["ln_outliers"] = detection.table()
    payload["ln_detection"] = {
        "k": detection.k,
        "share": detection.share,
        "norms": detection.names,
        "layers_needed": detection.needed,
    }
    payload["model"] = loaded.info.to_dict()
    payload["corpus"] = {
        "name": corpus.name,
        "kind": corpus.kind,
        "num_texts": len(corpus),
        "notices": list(corpus.notices),
    }
    ordered = {key: payload[key] for key in ("dims", "ln_outliers", "effect", "random_controls")}
    ordered.update({k: v for k, v in payload.items() if k not in ordered})
    return ordered


def run(args: argparse.Namespace) -> int:
    from isoscope.analysis.layernorm.ablation import has_mlm_checkpoint, parse_dims, run_ablation
    from isoscope.analysis.layernorm.params import ln_outliers
    from isoscope.engine.errors import InputError

    out = check_out_path(args.out)
    LN_K.check(args.k, LN_K.flag)  # before any model loads
    LN_SHARE.check(args.share, LN_SHARE.flag)
    RANDOM_CONTROLS.check(args.random_controls, RANDOM_CONTROLS.flag)
    auto = args.dims.strip().lower() == "auto"
    if not auto:
        parse_dims(args.dims, 1 << 30)  # syntax first (range once the model is loaded)
    if args.pairs and not args.texts:
        raise InputError(
            "--pairs needs --texts: images and audio have no sentence pairs (the end metric is "
            "the final-state cosine)"
        )
    corpus = load_inputs(args)
    pairs = read_pairs(args.pairs) if args.pairs else None
    loaded = _load_with_mlm_head(args) if has_mlm_checkpoint(args.model) else None
    if loaded is None:
        loaded = load_model_from_args(args)
    norms = _chosen_norms(args, loaded)
    detection = ln_outliers(loaded, None, k=args.k, share=args.share)
    if auto:
        dims = detection.dims
        if not dims:
            raise InputError(
                f"no LayerNorm outlier dims detected (k={args.k}, share={args.share}); pass --dims D1,D2 "
                "or lower --k / --share"
            )
        progress_line(f"LayerNorm outlier dims: {', '.join(map(str, dims))}")
    else:
        dims = parse_dims(args.dims, loaded.info.hidden_size)
    report = run_ablation(
        loaded,
        corpus.texts if corpus.kind == "text" else corpus.items,
        dims,
        norms=norms,
        random_controls=args.random_controls,
        seed=args.seed,
        max_length=args.max_length,
        batch_size=args.batch_size,
        pairs=pairs,
        in_place=True,
        progress=ProgressPrinter(
            f"ablating (original, ablation, {args.random_controls} random controls) batches"
        ),
    )
    for notice in report.notices:
        progress_line(f"note: {notice}")
    write_json(out, _payload(report, detection, loaded, corpus))
    final = report.effect.embedding_cosine[-1]
    controls = [e.embedding_cosine[-1] for _, e in report.controls]
    progress_line(
        f"final-state embedding cosine: ablation {final:.4f}"
        + (f" vs random controls {min(controls):.4f}..{max(controls):.4f}" if controls else "")
    )
    return 0
