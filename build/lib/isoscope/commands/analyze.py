"""``isoscope analyze``: per-hidden-state statistics, outlier dims and anisotropy as JSON."""

from __future__ import annotations

import argparse
from dataclasses import replace

from isoscope.analysis.anisotropy import HISTOGRAM_BINS, N_PAIRS, TOP_DIMS
from isoscope.commands.common import (
    DownloadPrinter,
    ProgressPrinter,
    add_cache_args,
    add_exclude_first_arg,
    add_input_args,
    add_model_args,
    check_cache_args,
    check_out_path,
    deprecated_alias,
    load_and_extract,
    load_inputs,
    print_notices,
    progress_line,
    resolve_exclude_first,
    settings_from_args,
    write_json,
)
from isoscope.engine.params import SAMPLE_SIZE, SEED, TOKEN_BUDGET


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="per-layer statistics, outlier dimensions and anisotropy")
    add_model_args(p)
    add_input_args(
        p,
        ".txt (one text per line), .csv, .jsonl or .parquet with a text column, or a folder "
        "of such shards (read in sorted path order)",
    )
    p.add_argument("--out", required=True, help="output JSON file")
    p.add_argument(
        "--n-pairs", type=int, default=N_PAIRS, help="random different-text pairs for anisotropy"
    )
    p.add_argument(  # its old name: every other command's --pairs is a CSV of sentence pairs
        "--pairs",
        type=int,
        dest="n_pairs",
        action=deprecated_alias(
            "--n-pairs", "--pairs is a CSV of sentence pairs in other commands"
        ),
        help=argparse.SUPPRESS,
    )
    SEED.add_argument(p)
    SAMPLE_SIZE.add_argument(p, help="token vectors kept for pairwise metrics")
    TOKEN_BUDGET.add_argument(
        p,
        help="padded tokens per batch (texts x longest text; --batch-size caps the texts); "
        "halved automatically when the device runs out of memory",
    )
    p.add_argument(
        "--sample-budget",
        default="1G",
        help="memory for the token sample (states x tokens x width float32), e.g. 512M or 2G; "
        "fewer tokens are kept on models where --sample-size does not fit (default 1G)",
    )
    p.add_argument(
        "--exclude-special",
        action="store_true",
        help="leave [CLS]/[SEP]-style tokens out of the statistics",
    )
    p.add_argument(
        "--histogram-bins",
        type=int,
        default=HISTOGRAM_BINS,
        help="bins of the per-layer cosine histogram over [-1, 1]",
    )
    TOP_DIMS.add_argument(p)
    add_exclude_first_arg(p)
    add_cache_args(p)
    p.add_argument(
        "--save",
        default=None,
        metavar="RUN.isoscope",
        help="also write the whole extraction (statistics, token sample and table, texts, model "
        "card) as a saved analysis the dashboard opens without the model: a zip, or a folder if "
        "the path is an existing folder",
    )
    add_engine_args(p)
    p.set_defaults(func=run)


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """--engine local|ray and the Ray options (isoscope.engine.extraction.ray_cluster)."""
    group = p.add_argument_group("engine (Ray runs neither read nor write the extraction cache)")
    group.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: this process; ray: Ray Data workers, each loading the model once",
    )
    group.add_argument(
        "--ray-address",
        default="local",
        help="local: a private Ray instance on this machine, stopped afterwards | auto: the "
        "cluster `ray start --head` started on this machine | HOST:PORT or ray://HOST:PORT",
    )
    group.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Ray workers (default: one per CPU, or per --gpus-per-worker GPUs, of the cluster)",
    )
    group.add_argument(
        "--gpus-per-worker",
        type=float,
        default=0.0,
        help="GPUs per Ray worker; 0 runs the workers on CPUs (default 0)",
    )


def run(args: argparse.Namespace) -> int:
    from isoscope.engine.errors import InputError
    from isoscope.engine.store.limit import parse_size

    out = check_out_path(args.out)
    check_cache_args(args)  # a typo fails before the model loads
    if args.n_pairs < 1:
        raise InputError("--n-pairs must be at least 1")
    if not 1 <= args.histogram_bins <= 1000:
        raise InputError(f"--histogram-bins must be between 1 and 1000, got {args.histogram_bins}")
    TOP_DIMS.check(args.top_dims, TOP_DIMS.flag)
    if args.save:
        from isoscope.engine.store.saved import check_save_target

        check_save_target(args.save)  # a bad path fails before the extraction, not after
    # Ray reads a text corpus as a dataset itself; images and audio are read here, as locally
    corpus = load_inputs(args) if args.engine == "local" or not args.texts else None
    settings = settings_from_args(
        args,
        token_budget=args.token_budget,
        exclude_special=args.exclude_special,
        sample_budget_bytes=parse_size(args.sample_budget, "--sample-budget"),
    )
    if args.engine == "ray":
        settings = replace(settings, exclude_first=resolve_exclude_first(args))
        result = run_ray(args, settings, corpus)
        print_notices(result)
    else:
        _, result = load_and_extract(args, corpus, settings)
    if args.save:
        from isoscope.engine.store.saved import save_analysis

        progress_line(f"saved analysis: {save_analysis(result, args.save)}")
    report = build_report(
        result,
        pairs=args.n_pairs,
        seed=args.seed,
        bins=args.histogram_bins,
        top_dims=args.top_dims,
    )
    if report["corpus"]["anisotropy_note"]:
        progress_line(f"note: {report['corpus']['anisotropy_note']}")
    write_json(
        out,
        report,
    )
    return 0


def run_ray(args: argparse.Namespace, settings, media=None):
    """The extraction on Ray (isoscope.engine.extraction.ray_engine): the corpus path is read as a Ray dataset;
    ``media``: the images / clips already read (the driver ships them to the workers)."""
    from isoscope.engine.errors import InputError
    from isoscope.engine.extraction.ray_cluster import ModelSpec, RayOptions
    from isoscope.engine.extraction.ray_engine import run_ray_extraction

    gpus = args.gpus_per_worker
    device = args.device
    if device == "auto":
        device = "cuda" if gpus > 0 else "cpu"
    if device == "cuda" and gpus <= 0:
        raise InputError("--engine ray with --device cuda needs --gpus-per-worker (e.g. 1)")
    if device not in ("cpu", "cuda"):
        raise InputError(f"--engine ray runs workers on cpu or cuda, not {device!r}")
    spec = ModelSpec(args.model, device, args.dtype, args.allow_pickle)
    options = RayOptions(address=args.ray_address, workers=args.workers, gpus_per_worker=gpus)
    unit = "texts" if media is None else {"image": "images", "audio": "clips"}[media.kind]
    progress = ProgressPrinter(f"extracting on Ray ({args.ray_address}), {unit}")
    corpus = args.texts if media is None else media
    downloads = DownloadPrinter(args.model)  # a Hub id not cached: fetched once, on the driver
    result = run_ray_extraction(
        spec, corpus, settings, options, progress, download_progress=downloads
    )
    engine = result.extra.get("engine", {})
    progress_line(
        f"engine: ray · {engine.get('workers')} worker(s) on {device} · model "
        f"{result.model.get('display_name', args.model)}"
    )
    return result


def build_report(
    result,
    *,
    pairs: int = N_PAIRS,
    seed: int = 0,
    bins: int = HISTOGRAM_BINS,
    top_dims: int = TOP_DIMS.default,
) -> dict:
    """The analyze JSON: model card, corpus summary and one entry per hidden state (0 = emb).

    Per state: statistics, outlier dims, anisotropy (Ethayarajh 2019) and, on the same random pairs,
    the anisotropy after zeroing that state's ``outlier_dims`` (Luo et al. 2021), the cosine
    histogram, Timkey's top cosine dims with their share of the mean cosine, and IsoScore (Rudman
    et al. 2022; null when the token sample has fewer points than dimensions).
    """
    from isoscope.analysis.anisotropy import (
        by_state,
        clipped_anisotropy_by_state,
        why_no_anisotropy,
    )
    from isoscope.analysis.outliers import criteria_by_state, outlier_dims_by_state

    iso = by_state(result, n_pairs=pairs, seed=seed, bins=bins, top_k=top_dims, similarity=False)
    aniso = iso.anisotropy
    criteria = criteria_by_state(result)
    dims_by_state = outlier_dims_by_state(result, criteria=criteria)
    clipped = clipped_anisotropy_by_state(result, dims_by_state, n_pairs=pairs, seed=seed)
    edges = [float(e) for e in iso.histogram_edges]
    layers = []
    for s, name in enumerate(result.state_names):
        layers.append(
            {
                "index": s,
                "name": name,
                "mean": result.mean[s],
                "variance": result.variance[s],
                "argmin_freq": result.argmin_freq[s],
                "argmax_freq": result.argmax_freq[s],
                "outlier_dims": dims_by_state[s],
                "outliers_by_criterion": criteria[s],
                "anisotropy": float(aniso[s]),
                "anisotropy_clipped": float(clipped[s]),
                "isoscore": float(iso.isoscore[s]),
                "cosine_histogram": {"edges": edges, "counts": iso.histogram_counts[s].tolist()},
                "top_cosine_dims": [[dim, share] for dim, share in iso.top_dims[s]],
            }
        )
    model = dict(result.model)
    return {
        "model": model,
        "corpus": {
            "name": result.corpus_name,
            "kind": result.extra.get("inputs", {}).get("kind", "text"),
            "num_texts": result.num_texts,
            "num_tokens": result.num_tokens,
            "sample_size": len(result.sample_index),
            "notices": list(result.notices),
            "anisotropy_note": why_no_anisotropy(result),  # null when anisotropy is defined
        },
        "settings": result.settings.to_dict(),
        "layers": layers,
    }
