"""A shareable report: findings written from the measured numbers, the key figure of each page, the
model card, the corpus, the settings and the isoscope version, as one self-contained offline HTML
file (plotly.js inlined once).

Every number comes from an existing analysis (never re-derived here):

- outlier dims: :mod:`isoscope.analysis.outliers` (Luo et al. 2021, arXiv 2011.04393; Timkey & van Schijndel
  2021, arXiv 2109.04404) and :func:`isoscope.plots.outliers.headline_outlier`;
- anisotropy and clipping: :mod:`isoscope.analysis.anisotropy` (Ethayarajh 2019, arXiv 1909.00512; Timkey's
  per-dimension split; IsoScore, Rudman et al. 2022) and :func:`isoscope.analysis.projections.methods.before_after`;
- LayerNorm outliers and their ablation against random controls: :mod:`isoscope.analysis.layernorm.params`,
  :func:`isoscope.analysis.layernorm.ablation.run_ablation` (Kovaleva et al. 2021, BERT Busters, arXiv 2105.06990);
- positional information: :mod:`isoscope.analysis.positional.table` (Luo et al. section 4);
- sentence similarity (with ``pairs``): :mod:`isoscope.analysis.similarity`;
- massive activations and attention sinks, for decoders: ``isoscope.analysis.massive.scan``
  (``massive`` / ``sinks``);
- quantization readiness (optional, :mod:`isoscope.share.report.quant`):
  :mod:`isoscope.analysis.quant.readiness`.

A section that does not apply (no LayerNorm outliers, no position table, an encoder for the massive
activations section, no pairs) is kept as one line saying why; a section whose analysis raises is kept as one line
naming the error. The report as a whole never fails. The HTML holds no timestamp and fixed figure ids,
so the same model, corpus and settings give the same bytes (the CLI and the app's download agree).
"""

from isoscope.share.report.build import BUILDERS, build_report
from isoscope.share.report.model import (
    OPTIONAL_SECTIONS,
    QUICK_SECTIONS,
    SECTION_TITLES,
    SECTIONS,
    SOURCES,
    Report,
    ReportSettings,
    Section,
)
from isoscope.share.report.render import render_html

__all__ = [
    "BUILDERS",
    "OPTIONAL_SECTIONS",
    "QUICK_SECTIONS",
    "SECTIONS",
    "SECTION_TITLES",
    "SOURCES",
    "Report",
    "ReportSettings",
    "Section",
    "build_report",
    "render_html",
]
