"""Building a report: every requested section's builder run on one model and its extraction; a
section that raises is kept as one line naming the error, so the report as a whole never fails."""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from isoscope.engine.budget.progress import Progress
from isoscope.engine.errors import InputError, IsoscopeError
from isoscope.engine.inputs.media import KIND_NOUNS
from isoscope.share.report.cards import dimension_section
from isoscope.share.report.model import (
    SECTION_TITLES,
    SOURCES,
    Report,
    ReportSettings,
    Section,
)
from isoscope.share.report.model import SECTIONS as DEFAULT_SECTIONS
from isoscope.share.report.prose import BUILDERS as PROSE_BUILDERS
from isoscope.share.report.prose import Context
from isoscope.share.report.quant import quant_section

BUILDERS = {**PROSE_BUILDERS, "dimension": dimension_section, "quant": quant_section}

# ----------------------------------------------------------------------------- building


def _section(key: str, ctx: Context) -> Section:
    """One built section, or the section skipped with why: the analysis's own message, or (for a
    bug in one analysis, which must not lose the others) the exception and where it was raised."""
    try:
        return BUILDERS[key](ctx)
    except IsoscopeError as exc:
        return Section(key, SECTION_TITLES[key], skipped=str(exc), source=SOURCES[key])
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return Section(
            key,
            SECTION_TITLES[key],
            skipped=f"could not be computed ({type(exc).__name__}: {str(exc)[:200]} at "
            f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno})",
            source=SOURCES[key],
        )


def _left_out_notice(kind: str, built: list[Section]) -> str:
    left_out = [s.title for s in built if s.skipped is not None]
    return f"this analysis read {KIND_NOUNS[kind]}: " + (
        f"{', '.join(left_out)} left out (each section says why)"
        if left_out
        else "every section applies"
    )


def build_report(
    loaded,
    result,
    *,
    settings: ReportSettings | None = None,
    pairs: tuple[Sequence[str], Sequence[str], Sequence[float]] | None = None,
    sections: Sequence[str] = DEFAULT_SECTIONS,
    in_place: bool = False,
    quant=None,
    progress: Progress | None = None,
    inputs: Sequence | None = None,
    criteria: Sequence[Mapping[str, Sequence[int]]] | None = None,
) -> Report:
    """Run every section on ``loaded`` and its extraction ``result``; never raises for a section.

    ``pairs`` = (sentences A, sentences B, gold scores) adds STS figures. ``in_place=True`` lets the
    LayerNorm ablation modify the model (restored bit-for-bit) instead of a private copy: only for a
    process that owns the model, like the CLI. ``inputs``: an image / audio analysis's items
    (``MediaCorpus.items``), which the LayerNorm ablation reruns the model on. ``quant``: a
    finished :class:`~isoscope.analysis.quant.readiness.QuantReport` for the optional "quant"
    section (otherwise that section runs the analysis). ``criteria``: what
    :func:`~isoscope.analysis.outliers.criteria_by_state` returned for ``result`` with the
    default thresholds, when the caller has it (the Overview's page does), so it is not computed
    again.
    """
    from isoscope import __version__

    settings = settings or ReportSettings()
    unknown = [s for s in sections if s not in BUILDERS]
    if unknown:
        raise InputError(
            f"unknown report section(s) {', '.join(unknown)}; choose from {', '.join(BUILDERS)}"
        )
    ctx = Context(
        loaded,
        result,
        settings,
        None if pairs is None else (list(pairs[0]), list(pairs[1]), list(pairs[2])),
        in_place,
        inputs=None if inputs is None else tuple(inputs),
    )
    if quant is not None:
        ctx.cache["quant_report"] = quant
    if criteria is not None:
        ctx.cache["criteria"] = [dict(c) for c in criteria]
    built = []
    for i, key in enumerate(sections):
        built.append(_section(key, ctx))
        if progress is not None:
            progress(i + 1, len(sections))
    notices = list(result.notices)
    if ctx.kind != "text":  # one line naming what an image / audio report leaves out
        notices.append(_left_out_notice(ctx.kind, built))
    return Report(
        model=dict(result.model),
        corpus={
            "name": result.corpus_name,
            "sha256": result.corpus_sha,
            "num_texts": result.num_texts,
            "num_tokens": result.num_tokens,
            "token_sample": len(result.sample_index),
            "sentence_pairs": 0 if ctx.pairs is None else len(ctx.pairs[0]),
            "notices": notices,
            "kind": ctx.kind,
        },
        settings={"extraction": result.settings.to_dict(), "report": asdict(settings)},
        version=__version__,
        sections=built,
    )
