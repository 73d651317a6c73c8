"""The report's optional "Quantization readiness" section (docs/methods.md section 10).

Every number comes from :mod:`isoscope.analysis.quant.readiness` (LLM.int8, SmoothQuant, QuaRot,
Bondarenko et al. 2023): the verdict it writes, the hardest sites, the scheme comparison and the
per-block sensitivity, with the page's figures (:mod:`isoscope.plots.quant`). The section is
opt-in (``isoscope report --quant``; in the app, included once the Quantization page has run):
it costs one pass over ``ReportSettings.quant_texts`` texts, six fake-quantized passes of the end
texts and the batched sensitivity runs. A report built with a finished analysis (the page's) uses
it as it is; otherwise the section runs the analysis on the report's own model and corpus, on a
private copy of the model unless the caller owns it (``in_place``).
"""

from __future__ import annotations

import numpy as np

from isoscope.share.report.model import SECTION_TITLES, SOURCES, Section

KEY = "quant"
HARDEST_SITES = 3


def _pairs(ctx):
    """The report's sentence pairs as :class:`SentencePairs` for an encoder, else None."""
    if ctx.pairs is None or ctx.loaded.info.is_causal:
        return None
    from isoscope.engine.inputs.pairs import SentencePairs

    left, right, gold = ctx.pairs
    return SentencePairs(tuple(left), tuple(right), np.asarray(gold, dtype=np.float64), "pairs")


def _analysis(ctx):
    """The finished analysis handed to the report, else one run on the report's corpus."""
    given = ctx.cache.get("quant_report")
    if given is not None:
        return given
    from isoscope.analysis.quant.readiness import analyse
    from isoscope.engine.load.models import private_copy

    loaded = ctx.loaded if ctx.in_place else private_copy(ctx.loaded)
    s = ctx.result.settings
    return analyse(
        loaded,
        list(ctx.result.texts[: ctx.settings.quant_texts]),
        max_length=s.max_length,
        batch_size=s.batch_size,
        pairs=_pairs(ctx),
    )


def quant_section(ctx) -> Section:
    """Findings (the verdict, the hardest sites, outlier-dim overlaps), the scheme comparison and
    the sensitivity figure, and the scheme table."""
    from isoscope.analysis.quant.schemes import SCHEME_LABELS
    from isoscope.analysis.quant.sites import ROLE_LABELS
    from isoscope.plots.quant import scheme_figure, scheme_frame, sensitivity_figure

    sec = Section(KEY, SECTION_TITLES[KEY], source=SOURCES[KEY])
    report = _analysis(ctx).with_outlier_dims(ctx.result, ctx.outliers_by_state)
    scan = report.scan
    sec.findings.append(report.verdict())
    rows = report.site_rows()
    hardest = sorted(rows, key=lambda r: -r["error"]["per_token"])[:HARDEST_SITES]
    sec.findings.append(
        "Hardest sites for W8A8 per token: "
        + "; ".join(
            f"{r['modules'][0]} ({ROLE_LABELS.get(r['role'], r['role'])}, error "
            f"{r['error']['per_token']:.3f}, max/median |x| {r['max_over_median']:,.0f}, kurtosis "
            f"{r['kurtosis']:,.1f})"
            for r in hardest
        )
        + "."
    )
    overlap = sorted({c for r in rows for c in (r["outlier_overlap"] or [])})
    massive = list(scan.massive_dims)
    if overlap or massive:
        sec.findings.append(
            "Top input channels that are hidden-state outlier dims: "
            + (", ".join(map(str, overlap)) or "none")
            + "; massive-activation dims of the residual stream: "
            + (", ".join(map(str, massive)) or "none")
            + "."
        )
    sec.figures.append(scheme_figure(report))
    if report.sensitivity:
        sec.figures.append(sensitivity_figure(report))
    frame = scheme_frame(report)
    sec.tables.append(
        (
            "Schemes: simulated per-site error and the measured end metric",
            [
                {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}
                for row in frame.to_dict("records")
            ],
        )
    )
    sec.notes.extend(scan.notes)
    sec.notes.append(
        f"Measured on {scan.n_texts} texts ({scan.n_tokens:,} tokens); site errors on a seeded "
        f"sample of {scan.error_tokens:,} tokens, the end metric on the first "
        f"{scan.end_ids.shape[0]} texts; keep-K = {report.keep}, SmoothQuant α = "
        f"{report.alpha:g}. Schemes: {', '.join(SCHEME_LABELS.values())}."
    )
    return sec
