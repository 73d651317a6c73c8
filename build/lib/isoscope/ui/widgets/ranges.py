"""What each page control accepts, declared once: the page builds its widget from the declaration
and ui/sharing/links.py validates a link's value against the same one (scikit-learn's ``_param_validation``
idea: ``Interval`` / ``StrOptions``, one statement of a parameter's range read everywhere). The
types are :mod:`isoscope.engine.params`'s. A parameter the backend also reads (the outlier
thresholds, the LayerNorm thresholds, keep-K, α, an analysis's max length) is the backend's own
declaration, imported by the page under its one name; only the page's own controls live here.

:data:`LINK_CONTROLS` lists, per page (its URL path), the widget keys that travel in links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from isoscope.analysis.layernorm.thresholds import LN_K, LN_SHARE
from isoscope.analysis.massive.params import MASSIVE_MAX_LENGTH
from isoscope.analysis.outliers import (
    EXTREME_SHARE,
    QUANTILE,
    VARIANCE_FACTOR,
    ZSCORE_K,
)
from isoscope.analysis.projections.methods import METHODS
from isoscope.analysis.projections.postprocess import POSTPROCESSORS
from isoscope.analysis.quant.params import (
    IGNORE_SHARE,
    KEEP_K,
    QUANT_MAX_LENGTH,
    SMOOTHQUANT_ALPHA,
)
from isoscope.analysis.sae.params import DENSE_SHARE, SAE_MAX_LENGTH
from isoscope.engine.params import SEED, Interval, Options
from isoscope.plots.compare import TRAJECTORY_METRICS
from isoscope.plots.outliers import HEATMAP_STATS
from isoscope.share import tour


@dataclass(frozen=True)
class Tab:
    """A lazy tab group's open tab (its label). The labels live with the page's ``lazy_tabs``
    call, which drops an unknown one with the link notice (``isoscope.ui.sharing.links.check_tab``)."""

    def parse(self, text: str) -> Any:
        if not text.strip() or len(text) > 200:
            raise ValueError(text)
        return text


TAB = Tab()


@dataclass(frozen=True)
class HubSaeSource:
    """An SAE source a link may carry: a Hub id plus the SAE's path in the repo, as its canonical
    text (a server folder never travels in a link)."""

    def parse(self, text: str) -> Any:
        from isoscope.analysis.sae.load import parse_sae_source
        from isoscope.engine.errors import IsoscopeError

        if len(text) > 300:
            raise ValueError(text)
        try:
            parsed = parse_sae_source(text)
        except IsoscopeError as exc:  # the link's value is simply invalid
            raise ValueError(text) from exc
        if parsed.kind != "hub":
            raise ValueError(text)
        return parsed.text


def post_options(include_none: bool) -> tuple[str, ...]:
    """The post-processing select's choices (``postprocessing_controls``)."""
    return tuple(p for p in POSTPROCESSORS if include_none or p != "none")


# ----------------------------------------------------------------------------- per page
OUT_STAT = Options(tuple(HEATMAP_STATS))

ANISO_POST = Options(post_options(include_none=True), "clip")

PROJ_ALL_TOKENS = "all tokens"  # every token of one state (ui/widgets/atlas.py)
PROJ_DATA = Options(("token sample", "mean-pooled texts", PROJ_ALL_TOKENS))
PROJ_METHOD = Options(tuple(METHODS))
PROJ_POST = Options(post_options(include_none=False), "clip")

# The Similarity page's clip modes (value -> description) and "Also compare" choices.
SIMILARITY_CLIP_MODES = {
    "auto": "each state's outlier dims, detected on the evaluated sentences",
    "corpus": "outlier dims detected on the sidebar corpus (per state)",
    "typed": "dimensions I type (every state)",
}
SIMILARITY_POST_CHOICES = ("none",) + tuple(p for p in POSTPROCESSORS if p not in ("none", "clip"))
SIM_CLIP = Options(tuple(SIMILARITY_CLIP_MODES))
SIM_POST = Options(SIMILARITY_POST_CHOICES, "standardize")

QUANT_ALPHA_AUTO = Options((True, False), True)  # α from the sweep (True) or the slider
QUANT_PAIRS = Options(("none", "bundled sample pairs", "upload a CSV"))  # encoders' STS pairs

MODES = ("two models, one corpus", "one model, two corpora")
ESTIMATORS = {"auto": None, "debiased": True, "plain": False}  # label -> debiased CKA
CMP_MODE = Options(MODES)
CMP_ESTIMATOR = Options(tuple(ESTIMATORS))
CMP_TRAJ_METRIC = Options(tuple(TRAJECTORY_METRICS))

TOUR_STEP = Options(tuple(str(i + 1) for i in range(len(tour.TITLES))))

LINK_CONTROLS: dict[str, dict[str, Options | Interval | Tab]] = {
    "outliers": {
        "out_stat": OUT_STAT,
        "out_thr_extreme": EXTREME_SHARE,
        "out_thr_z": ZSCORE_K,
        "out_thr_q": QUANTILE,
        "out_thr_var": VARIANCE_FACTOR,
        "out_view": TAB,
    },
    "anisotropy": {"aniso_post": ANISO_POST},
    "projections": {
        "proj_data": PROJ_DATA,
        "proj_method": PROJ_METHOD,
        "proj_post": PROJ_POST,
        "proj_seed": SEED,
    },
    "similarity": {
        "sim_sts_clip_mode": SIM_CLIP,
        "sim_sts_post": SIM_POST,
        "sim_wic_clip_mode": SIM_CLIP,
        "sim_wic_post": SIM_POST,
    },
    "layernorm": {"ln_k": LN_K, "ln_share": LN_SHARE, "ln_tab": TAB},
    "positional": {"pos_tab": TAB, "pos_emb_view": TAB},
    "massive": {"massive_tab": TAB, "massive_max_length": MASSIVE_MAX_LENGTH},
    "quant": {
        "quant_max_length": QUANT_MAX_LENGTH,
        "quant_keep": KEEP_K,
        "quant_alpha": SMOOTHQUANT_ALPHA,
        "quant_alpha_auto": QUANT_ALPHA_AUTO,
        "quant_ignore_share": IGNORE_SHARE,
        "quant_pairs": QUANT_PAIRS,
        "quant_tab": TAB,
    },
    "compare": {
        "cmp_mode": CMP_MODE,
        "cmp_estimator": CMP_ESTIMATOR,
        "cmp_traj_metric": CMP_TRAJ_METRIC,
    },
    "tour": {"tour_step": TOUR_STEP},
    "sae": {
        "sae_source": HubSaeSource(),
        "sae_max_length": SAE_MAX_LENGTH,
        "sae_dense_share": DENSE_SHARE,
        "sae_tab": TAB,
    },
    "dimension": {"dim_dim": Interval(0, 1 << 20, 0, integer=True, name="dim")},
}
