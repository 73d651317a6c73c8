"""Will this checkpoint quantize? Per-site activation statistics, simulated error and the measured
end-to-end loss (docs/methods.md section 10), in four modules along the analysis's seams:

- :mod:`.scan`: :func:`scan_sites`, the one pass over the corpus (statistics, token sample, the end
  texts' reference state, massive dims);
- :mod:`.evaluation`: :func:`evaluate`, the per-site error and end metric per scheme, and
  :func:`layer_sensitivity`, each block quantized alone;
- :mod:`.report`: :class:`QuantReport` (rows, verdict, JSON) and :func:`analyse`, scan then
  evaluation;
- :mod:`.tiles`: :func:`site_magnitudes`, one site's token x channel |x| view.
"""

from isoscope.analysis.quant.readiness.evaluation import (
    Evaluation,
    bootstrap_intervals,
    evaluate,
    layer_sensitivity,
    mixed_end,
    output_embeddings,
    pairs_spearman,
    prefix_curve,
    quantized_state,
    spearman,
)
from isoscope.analysis.quant.readiness.report import (
    QuantReport,
    analyse,
    outlier_dims_per_block,
    report_from,
    role_label,
)
from isoscope.analysis.quant.readiness.scan import (
    TOP_CHANNELS,
    QuantScan,
    SiteAccumulator,
    SiteScan,
    sample_positions,
    scan_sites,
    weighted_median,
)
from isoscope.analysis.quant.readiness.tiles import MagnitudeTiles, site_magnitudes
from isoscope.analysis.quant.sites import is_projection

__all__ = [
    "TOP_CHANNELS",
    "Evaluation",
    "MagnitudeTiles",
    "QuantReport",
    "QuantScan",
    "SiteScan",
    "SiteAccumulator",
    "sample_positions",
    "analyse",
    "bootstrap_intervals",
    "evaluate",
    "is_projection",
    "layer_sensitivity",
    "outlier_dims_per_block",
    "output_embeddings",
    "mixed_end",
    "pairs_spearman",
    "prefix_curve",
    "quantized_state",
    "report_from",
    "role_label",
    "scan_sites",
    "site_magnitudes",
    "spearman",
    "weighted_median",
]
