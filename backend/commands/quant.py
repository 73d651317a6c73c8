"""``isoscope quant``: will this checkpoint quantize? Per-site activation scales (SmoothQuant's
``act_scales``), kurtosis and |x| >= 6 share, the simulated W8A8 / W4 error of each scheme per
site, the measured end-to-end loss of each scheme and the per-block sensitivity (docs/quantization.md;
``isoscope.analysis.quant``)."""

from __future__ import annotations

import argparse

from isoscope.analysis.quant.ignore_list import MAX_BLOCKS
from isoscope.analysis.quant.params import (
    ALPHA_GRID,
    END_TOKENS,
    ERROR_TOKENS,
    IGNORE_SHARE,
    KEEP_K,
    QUANT_BATCH_SIZE,
    QUANT_MAX_LENGTH,
    SMOOTHQUANT_ALPHA,
)
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
        "quant",
        help="quantization readiness: act_scales, kurtosis, simulated W8A8/W4 error, end loss",
        description="Writes {model, corpus, sites: [{modules, layer, role, max_abs, median_abs, "
        "kurtosis, share_gt_6, top_channels: [{channel, max_abs}], error: {per_tensor, per_token, "
        "keep_k, smoothquant, rotation, w4_g128}}], end: {metric, full_precision, per_tensor, ...}, "
        "sensitivity: [{layer, end}], spearman_error_vs_end, site_map: [{layer, role, modules, norm, "
        "traced}] (every projection of the blocks, each in one site)}. Site errors use a seeded sample of "
        "--error-tokens tokens; the end metric and sensitivity the first texts up to --end-tokens.",
    )
    add_model_args(p, max_length=QUANT_MAX_LENGTH, batch_size=QUANT_BATCH_SIZE)
    p.add_argument(
        "--texts", required=True, help=".txt (one text per line), .csv or .jsonl with a text column"
    )
    p.add_argument("--out", required=True, help="output JSON file")
    KEEP_K.add_argument(p)
    SMOOTHQUANT_ALPHA.add_argument(
        p,
        help="SmoothQuant migration strength; by default the best of the sweep over "
        + ", ".join(f"{a:g}" for a in ALPHA_GRID)
        + " (the lowest mean per-site SmoothQuant error on the same scan)",
    )
    p.set_defaults(alpha=None)  # None: the sweep chooses; a given --alpha overrides it
    ERROR_TOKENS.add_argument(p)
    END_TOKENS.add_argument(p)
    p.add_argument(
        "--no-sensitivity", action="store_true", help="skip the per-block sensitivity runs"
    )
    p.add_argument(
        "--pairs",
        default=None,
        help="encoders: CSV sentence1,sentence2,score (as for `isoscope sts`); adds the STS "
        "Spearman x 100 of the mean-pooled final state in full precision and per scheme to `end`",
    )
    p.add_argument(
        "--act-scales",
        default=None,
        help="also write SmoothQuant's act_scales (module name -> float32 per-channel max |x|) "
        "to this .safetensors file",
    )
    p.add_argument(
        "--recipe",
        default=None,
        help="also write an llm-compressor recipe (YAML: SmoothQuant mappings from the traced "
        "wiring, W8A8, the most sensitive blocks ignored, each with its reason) to this .yaml "
        "file; the same decisions go to the output JSON's `recipe`",
    )
    p.add_argument(
        "--recipe-json",
        default=None,
        help="also write the recipe's decisions as plain JSON (for other toolchains) to this file",
    )
    IGNORE_SHARE.add_argument(p)
    p.add_argument(
        "--ignore-max-blocks",
        type=int,
        default=MAX_BLOCKS,
        help="at most this many blocks kept in full precision by the recipe",
    )
    p.add_argument(
        "--no-outlier-overlap",
        action="store_true",
        help="skip the extraction that finds the hidden-state outlier dims (each site's "
        "outlier_overlap is then null)",
    )
    add_cache_args(p)
    p.set_defaults(func=run_quant)


def _refuse_pairs(name: str) -> None:
    from isoscope.engine.errors import InputError

    raise InputError(
        f"--pairs is for encoders (STS of mean-pooled sentence vectors); {name} is a decoder, "
        "whose end metric is the next-token KL: leave out --pairs"
    )


def run_quant(args: argparse.Namespace) -> int:
    from isoscope.analysis.quant.ignore_list import check_ignore_rule
    from isoscope.analysis.quant.params import check_keep_alpha
    from isoscope.analysis.quant.readiness import analyse
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.corpus import load_corpus_file

    out = check_out_path(args.out)
    check_cache_args(args)
    scales_path = None
    if args.act_scales is not None:
        if not args.act_scales.endswith(".safetensors"):
            raise InputError(
                f"--act-scales {args.act_scales!r} must end in .safetensors (e.g. act_scales.safetensors)"
            )
        scales_path = check_out_path(args.act_scales)
    for param in (QUANT_MAX_LENGTH, QUANT_BATCH_SIZE, ERROR_TOKENS, END_TOKENS):  # before loading
        param.check(getattr(args, param.name), param.flag)
    check_keep_alpha(args.keep, SMOOTHQUANT_ALPHA.default if args.alpha is None else args.alpha)
    check_ignore_rule(args.ignore_share, args.ignore_max_blocks)
    recipe_path = _recipe_path(args.recipe, (".yaml", ".yml"), "--recipe", "recipe.yaml")
    recipe_json = _recipe_path(args.recipe_json, (".json",), "--recipe-json", "recipe.json")
    corpus = load_corpus_file(args.texts)
    pairs = None
    if args.pairs is not None:
        from isoscope.engine.inputs.pairs import read_pairs_csv
        from isoscope.engine.load.models import source_is_causal

        pairs = read_pairs_csv(args.pairs)  # `isoscope sts`'s reader
        if source_is_causal(args.model):  # refused before any weights load
            _refuse_pairs(args.model)
    loaded = load_model_from_args(args)
    if pairs is not None and loaded.info.is_causal:  # the loaded model's own flag decides
        _refuse_pairs(loaded.info.display_name)
    for notice in corpus.notices:
        progress_line(f"note: {notice}")
    result = analyse(
        loaded,
        corpus.texts,
        max_length=args.max_length,
        batch_size=args.batch_size,
        keep=args.keep,
        alpha=args.alpha,
        error_tokens=args.error_tokens,
        end_tokens=args.end_tokens,
        sensitivity=not args.no_sensitivity,
        pairs=pairs,
        progress=ProgressPrinter(f"quantization readiness of {len(corpus)} texts"),
    )
    if not args.no_outlier_overlap:
        result = result.with_outlier_dims(_extraction(loaded, corpus, args))
    for note in result.scan.notes:
        progress_line(f"note: {note}")
    progress_line(result.verdict())
    payload = result.to_dict(
        model=loaded.info.to_dict(), corpus={"name": corpus.name, "sha": corpus.sha}
    )
    payload["site_map"] = [  # every projection of the blocks, in one site each
        {
            "layer": site.layer,
            "role": site.role,
            "modules": list(site.modules),
            "norm": site.norm,
            "traced": site.traced,
        }
        for site in result.scan.site_map.sites
    ]
    if recipe_path is not None or recipe_json is not None:
        recipe = _recipe(loaded, result, args)
        payload["recipe"] = recipe.to_dict()
        if recipe_path is not None:
            recipe_path.write_text(recipe.yaml(), encoding="utf-8")
            progress_line(f"wrote {recipe_path}")
        if recipe_json is not None:
            write_json(recipe_json, recipe.to_dict())
    if scales_path is not None:
        from safetensors.torch import save_file

        save_file(result.scan.act_scales(), str(scales_path))
        progress_line(f"wrote {scales_path}")
    write_json(out, payload)
    return 0


def _extraction(loaded, corpus, args: argparse.Namespace):
    """The corpus's extraction (through the result cache) at the command's max length, first
    position left out on decoders as everywhere by default: where the hidden-state outlier dims
    of each site's overlap come from, as on the page (the sidebar's extraction)."""
    from isoscope.commands.common import resolve_exclude_first
    from isoscope.engine.extraction import ExtractionSettings

    settings = ExtractionSettings(
        max_length=args.max_length,
        batch_size=args.batch_size,
        exclude_first=resolve_exclude_first(args, loaded),
    )
    return extract_with_cache(loaded, corpus, settings, args, label="hidden-state outlier dims")


def _recipe_path(value: str | None, suffixes: tuple[str, ...], flag: str, example: str):
    if value is None:
        return None
    if not value.lower().endswith(suffixes):
        from isoscope.engine.errors import InputError

        raise InputError(f"{flag} {value!r} must end in {' or '.join(suffixes)} (e.g. {example})")
    return check_out_path(value)


def _recipe(loaded, result, args: argparse.Namespace):
    """The recipe of this run, with its predicted end metric (two passes of the end texts), and
    the decision it names printed as one line."""
    from isoscope.analysis.quant.recipe import build_recipe, predict

    recipe = predict(
        loaded,
        result,
        build_recipe(
            loaded, result, ignore_share=args.ignore_share, max_blocks=args.ignore_max_blocks
        ),
    )
    for note in recipe.notes:
        progress_line(f"note: {note}")
    progress_line(recipe.decision())
    return recipe
