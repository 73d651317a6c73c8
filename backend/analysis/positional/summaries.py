"""Tables the Positional page shows about its analyses, built here so the page only renders them.

- :func:`variance_slope_table`: the variance lab's log-log slopes per layer (Chi et al. 2023).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isoscope.analysis.positional.nope import VarianceCurves


def variance_slope_table(
    causal: VarianceCurves, bidirectional: VarianceCurves | None = None
) -> dict[str, list]:
    """Columns (name -> one value per layer) of the fitted slopes of log variance on log position:
    the causal run's attention output and residual stream and, when given, the bidirectional
    run's attention output. Theory for layer 1: -1 causal, 0 bidirectional."""
    columns: dict[str, list] = {
        "layer": list(range(1, len(causal.slopes) + 1)),
        "slope, attention output (causal)": [float(v) for v in causal.slopes],
        "slope, residual stream (causal)": [float(v) for v in causal.resid_slopes],
    }
    if bidirectional is not None:
        columns["slope, attention output (bidirectional)"] = [
            float(v) for v in bidirectional.slopes
        ]
    return columns
