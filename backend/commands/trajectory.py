"""``isoscope trajectory``: per-layer statistics over training checkpoints as JSON.

Writes ``{"steps": [...], "checkpoints": [...], "states": [[per-state figures] per checkpoint],
"layernorm", "emergence", "complete", "errors"}`` (see :meth:`isoscope.analysis.compare.trajectory.Trajectory.to_json`).
A checkpoint that fails to load, or has another architecture than the first, is skipped: the JSON
holds every checkpoint that worked, and the command then exits 2 with one line naming the problem.
"""

from __future__ import annotations

import argparse

from isoscope.commands.common import (
    ProgressPrinter,
    add_cache_args,
    add_input_args,
    add_model_args,
    check_cache_args,
    check_out_path,
    load_inputs,
    progress_line,
    settings_from_args,
    write_json,
)
from isoscope.engine.params import SAMPLE_SIZE, SEED


def add_parser(sub) -> None:
    p = sub.add_parser(
        "trajectory",
        help="largest |mean|, outlier dims, anisotropy and LayerNorm outliers over checkpoints",
    )
    p.add_argument(
        "--checkpoints",
        required=True,
        nargs="+",
        help="a folder of checkpoint-STEP/ (or stepSTEP/) folders, or several checkpoint folders",
    )
    add_input_args(p, ".txt (one text per line), .csv or .jsonl with a text column")
    p.add_argument("--out", required=True, help="output JSON file")
    add_model_args(p, source=False)  # the checkpoints name the models
    SAMPLE_SIZE.add_argument(p, help="token vectors kept for cosines")
    SEED.add_argument(p)
    add_cache_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from isoscope.analysis.compare.trajectory import resolve_checkpoints, run_trajectory
    from isoscope.engine.errors import InputError
    from isoscope.engine.inputs.media import KIND_NOUNS
    from isoscope.engine.store.cache import ResultCache

    out = check_out_path(args.out)
    check_cache_args(args)
    checkpoints = resolve_checkpoints(args.checkpoints)
    corpus = load_inputs(args)
    settings = settings_from_args(args)
    progress_line(
        f"{len(checkpoints)} checkpoints, steps {', '.join(str(c.step) for c in checkpoints)}"
    )
    trajectory = run_trajectory(
        checkpoints,
        corpus,
        settings,
        device=args.device,
        dtype=args.dtype,
        allow_pickle=args.allow_pickle,
        device_map=args.device_map,
        cache=ResultCache(args.cache_dir, args.cache_limit),
        use_cache=not args.no_cache,
        seed=args.seed,
        on_checkpoint=progress_line,
        extract_progress=ProgressPrinter(f"extracting {len(corpus)} {KIND_NOUNS[corpus.kind]}"),
    )
    if trajectory.points:
        write_json(out, trajectory.to_json())
    if trajectory.errors:
        kept = len(trajectory.points)
        more = f" (and {len(trajectory.errors) - 1} more)" if len(trajectory.errors) > 1 else ""
        saved = f"; {out} holds the {kept} checkpoint(s) that worked" if kept else ""
        raise InputError(f"{trajectory.errors[0]}{more}{saved}")
    return 0
