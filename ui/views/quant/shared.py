"""What the sections and tabs of the Quantization readiness page share: the anchor of the recipe
section, which the verdict links to, and a site's label in the site pickers."""

from __future__ import annotations

from isoscope.analysis.quant.sites import ROLE_LABELS

RECIPE_ANCHOR = "quant-recipe"  # the recipe section's heading, linked from the verdict


def site_name(s) -> str:
    """A site's label in the site pickers: block · role · the first module it feeds."""
    return f"{s.site.layer} · {ROLE_LABELS[s.site.role]} · {s.site.modules[0]}"
