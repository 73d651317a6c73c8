"""``isoscope report``: findings, key figures, model card, corpus and settings as one
self-contained offline HTML file (see :mod:`isoscope.share.report`); ``--images`` / ``--audio``
give the sections that apply to images and clips, and one line naming those left out."""

from __future__ import annotations

import argparse
import os

from isoscope.analysis.anisotropy import N_PAIRS
from isoscope.analysis.layernorm.thresholds import RANDOM_CONTROLS
from isoscope.commands.common import (
    ProgressPrinter,
    add_cache_args,
    add_exclude_first_arg,
    add_input_args,
    add_model_args,
    load_and_extract,
    load_inputs,
    progress_line,
    settings_from_args,
)
from isoscope.engine.params import SAMPLE_SIZE, SEED


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report", help="one self-contained HTML report: findings, key figures, model card"
    )
    add_model_args(p)
    add_input_args(p, ".txt (one text per line), .csv or .jsonl with a text column")
    p.add_argument("--out", required=True, help="output HTML file, e.g. report.html")
    p.add_argument(
        "--pairs",
        default=None,
        help="optional CSV with sentence1,sentence2,score: STS Spearman per state and in the ablation",
    )
    SEED.add_argument(p)
    SAMPLE_SIZE.add_argument(p, help="token vectors kept for pairwise metrics")
    p.add_argument(
        "--anisotropy-pairs",
        type=int,
        default=N_PAIRS,
        help="random different-text token pairs for anisotropy",
    )
    p.add_argument(
        "--ablation-texts", type=int, default=64, help="texts the LayerNorm ablation runs on"
    )
    RANDOM_CONTROLS.add_argument(p, help="random dim sets compared with the ablation")
    p.add_argument(
        "--quant",
        action="store_true",
        help="add the Quantization readiness section (simulated W8A8/W4 per site, the end loss "
        "per scheme, per-block sensitivity; several passes of the model on --quant-texts texts)",
    )
    p.add_argument(
        "--quant-texts", type=int, default=64, help="texts the quantization analysis runs on"
    )
    add_exclude_first_arg(p)
    add_cache_args(p)
    p.set_defaults(func=run)


def check_html_out(out: str):
    from pathlib import Path

    from isoscope.engine.errors import InputError

    path = Path(out)
    if path.is_dir():
        raise InputError(f"--out {out!r} is a folder; give a file name such as report.html")
    if not path.parent.exists():
        raise InputError(f"--out: folder {str(path.parent)!r} does not exist")
    return path


def run(args: argparse.Namespace) -> int:
    from isoscope.commands.common import read_pairs
    from isoscope.engine.errors import InputError
    from isoscope.share.report import SECTIONS, ReportSettings, build_report

    out = check_html_out(args.out)
    report_settings = ReportSettings(
        pairs=args.anisotropy_pairs,
        seed=args.seed,
        ablation_texts=args.ablation_texts,
        random_controls=args.random_controls,
        quant_texts=args.quant_texts,
    )
    if args.pairs and not args.texts:
        raise InputError("--pairs needs --texts: images and audio have no sentence pairs")
    corpus = load_inputs(args)
    pairs = read_pairs(args.pairs) if args.pairs else None
    loaded, result = load_and_extract(args, corpus, settings_from_args(args))
    report = build_report(
        loaded,
        result,
        settings=report_settings,
        pairs=pairs,
        sections=(*SECTIONS, "quant") if args.quant else SECTIONS,
        in_place=True,
        progress=ProgressPrinter("report sections"),
        inputs=None if corpus.kind == "text" else corpus.items,
    )
    for section in report.sections:
        if section.skipped is not None:
            progress_line(f"note: {section.title} left out: {section.skipped}")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(report.to_html(), encoding="utf-8")
    os.replace(tmp, out)
    progress_line(f"wrote {out} ({len(report.findings())} findings)")
    return 0
