"""Which sites the recipe's SmoothQuant mappings cover, and why not for the others.

SmoothQuant (Xiao et al. 2023, arXiv 2211.10438) moves activation outliers into the weights by a
per-channel scale s folded into the preceding norm's weight (1 / s) and into the consumers'
input columns (s): it needs a norm -> linear pair whose fold is exact. Every site of the model
(:func:`isoscope.analysis.quant.sites.discover_sites`: every projection of the blocks) gets one
line: smoothed by which norm, or why not (no norm feeds it; the norm cannot be folded, with
:func:`isoscope.analysis.quant.mappings.norm_mappings`' reason; the projection is never called as a
module). Sites that are not smoothed are still quantized W8A8 per token.
"""

from __future__ import annotations

from isoscope.analysis.quant.sites import ROLE_LABELS, SiteMap

NO_NORM = (
    "no norm's output is its input (SmoothQuant needs a norm -> linear pair to fold the scales "
    "into); quantized per token without smoothing"
)
UNTRACED = (
    "never called as a module (the mixer multiplies by its weight itself): no activation scale "
    "to measure or fold; its weight is quantized per output channel"
)


def site_coverage(site_map: SiteMap, mappings, skipped, notes=()) -> tuple[dict, ...]:
    """Per site: ``{layer, role, modules, smoothed_by}`` (the norm) or ``{..., not_smoothed}``
    (why). ``mappings`` / ``skipped``: :func:`~isoscope.analysis.quant.mappings.norm_mappings`'
    results; ``notes``: its notes (the reason when it wrote no mapping at all)."""
    smoothed = {b: m.smooth for m in mappings for b in m.balance}
    refused = {s.smooth: s.reason for s in skipped}
    general = notes[0] if notes and not mappings else None
    rows = []
    for site in site_map.sites:
        row = {
            "layer": site.layer,
            "role": ROLE_LABELS.get(site.role, site.role),
            "modules": list(site.modules),
        }
        by = {smoothed[m] for m in site.modules if m in smoothed}
        if not site.traced:
            row["not_smoothed"] = UNTRACED
        elif by and all(m in smoothed for m in site.modules):
            row["smoothed_by"] = sorted(by)[0]
        elif site.norm is None:
            row["not_smoothed"] = NO_NORM
        elif site.norm in refused:
            row["not_smoothed"] = f"its norm {site.norm} is not smoothed: {refused[site.norm]}"
        else:
            row["not_smoothed"] = f"its norm {site.norm} is not smoothed" + (
                f": {general}" if general else " (no mapping could be written for it)"
            )
        rows.append(row)
    return tuple(rows)
