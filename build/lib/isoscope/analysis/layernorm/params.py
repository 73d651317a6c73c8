"""Every LayerNorm of a model under one naming scheme, and its outlier parameters (BERT Busters).

Kovaleva, Kulshreshtha, Rogers & Rumshisky 2021, "BERT Busters: Outlier Dimensions that Disrupt
Transformers" (arXiv 2105.06990): a few LayerNorm scaling factors (gamma) and biases (beta) at the
same dimension across layers have high magnitudes. Puccetti et al. 2022 (arXiv 2205.11380) tie
them to token frequency; Timkey & van Schijndel 2021 (arXiv 2109.04404) measure their influence.

Canonical names (layers 1-based; the same in UI, CLI, JSON and code). Post-LN models (BERT,
RoBERTa, ELECTRA, DistilBERT, ...) have:

- ``emb.ln`` (role ``emb``): the embedding LayerNorm, producing hidden state ``emb``;
- ``L{i}.attn_ln`` (``attn``): after self-attention + residual;
- ``L{i}.out_ln`` (``out``): after the FFN + residual, producing hidden state i.

Pre-LN models (GPT-2, Llama-style, ...; recognised by a norm after the last layer) have:

- ``L{i}.pre_attn_ln`` (``pre_attn``): normalises the input of attention (GPT-2 ``ln_1``);
- ``L{i}.pre_mlp_ln`` (``pre_mlp``): normalises the input of the MLP (GPT-2 ``ln_2``);
- ``final_ln`` (``final``): after the last layer (GPT-2 ``ln_f``).

Sandwich-norm decoders (Gemma-2/3) add ``L{i}.attn_ln`` / ``L{i}.out_ln`` (roles ``attn`` /
``out``: the post-attention and post-feedforward norms, which feed no projection). Either kind:
``L{i}.norm{k}`` (``other``) for a further norm inside layer i (k = its 1-based place among the
layer's norms, e.g. OLMo-2's q norm) and ``head.ln`` (``head``) for the MLM head's LayerNorm.

Where each norm lives, its role, what it feeds and whether the model is pre-LN come from one traced
forward pass (:func:`isoscope.engine.arch.wiring`; no family table needed). RMSNorm
(Llama family) has no beta (treated as absent); Gemma's RMSNorm scales by 1 + weight, so its
reported gamma is weight + 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch

from isoscope.analysis.layernorm.thresholds import LN_THRESHOLDS, LayerNormThresholds
from isoscope.engine.arch import wiring
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import InputError, UnsupportedModelError
from isoscope.engine.load.models import LoadedModel

ROLES = ("emb", "attn", "out", "pre_attn", "pre_mlp", "other", "final", "head")
ROLE_LABELS = {
    "emb": "embedding LN",
    "attn": "post-attention LN",
    "out": "output LN (after FFN)",
    "pre_attn": "pre-attention LN",
    "pre_mlp": "pre-MLP LN",
    "other": "other norm in a layer",
    "final": "final LN",
    "head": "MLM head LN",
}
_PRE_LN_ORDER = ("pre_attn", "pre_mlp")


@dataclass(frozen=True)
class NormSite:
    """One norm of a model: canonical ``name``, ``role``, 1-based ``layer`` (None outside layers)
    and the module ``path`` inside ``LoadedModel.model``."""

    name: str
    role: str
    layer: int | None
    path: str
    module: torch.nn.Module = field(repr=False, compare=False)
    gamma_offset: float = 0.0  # effective gamma = weight + offset (Gemma's RMSNorm: 1)
    feeds: tuple[str, ...] = field(
        default=(), compare=False
    )  # projections its output is the input of

    @property
    def feeds_projections(self) -> bool:
        """Whether this norm's output is the input of a projection inside a Transformer block."""
        return bool(self.feeds)

    @property
    def has_bias(self) -> bool:
        return getattr(self.module, "bias", None) is not None


def _width(module: torch.nn.Module) -> int | None:
    weight = getattr(module, "weight", None)
    return int(weight.shape[0]) if isinstance(weight, torch.Tensor) and weight.ndim == 1 else None


def find_norms(
    model: torch.nn.Module,
    *,
    num_layers: int | None = None,
    width: int | None = None,
    parametric: bool = True,
) -> list[NormSite]:
    """All norms of ``model`` (a base model or a ``*ForMaskedLM``), named canonically, in forward
    order (embedding LN, each layer's norms, final LN, head LN). Where they live and their roles
    come from the traced wiring (:func:`isoscope.engine.arch.wiring`); norms narrower than the model width (ELECTRA's
    embedding LayerNorm before its projection) are left out.

    ``parametric=False`` also keeps norms without a weight (OLMo's non-parametric LayerNorm), for
    the views that read norm outputs rather than parameters (int8 sites).

    Raises :class:`UnsupportedModelError` when the norms cannot be traced per layer (ALBERT).
    """
    config = model.config
    width = int(width or getattr(config, "hidden_size", 0) or 0)
    try:
        wired = wiring(model)
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(
            f"no LayerNorm map for this model: {exc}; the LayerNorm page and `ablate` need one"
        ) from exc
    if num_layers is not None and int(num_layers) != wired.num_layers:
        raise UnsupportedModelError(
            f"{type(model).__name__}: expected {num_layers} layers, found {wired.num_layers} blocks"
        )
    modules = wired.modules(model)
    heads = [n for n in wired.norms if n.role == "head"]
    sites: list[NormSite] = []
    place: dict[int, int] = {}
    for norm in wired.norms:
        module = modules[norm.path]
        if norm.layer is not None:
            place[norm.layer] = place.get(norm.layer, 0) + 1
            layer = norm.layer + 1
            name = (
                f"L{layer}.{norm.role}_ln"
                if norm.role != "other"
                else f"L{layer}.norm{place[norm.layer]}"
            )
        else:
            layer = None
            name = {"emb": "emb.ln", "final": "final_ln"}.get(norm.role) or (
                "head.ln" if len(heads) == 1 else f"head.ln{heads.index(norm) + 1}"
            )
        if _width(module) != width and (parametric or _width(module) is not None):
            continue  # narrower (ELECTRA's embedding LN) or, for the parameter views, no gamma
        while name in {s.name for s in sites}:
            name += "'"
        sites.append(
            NormSite(name, norm.role, layer, norm.path, module, norm.gamma_offset, norm.feeds_block)
        )
    if not sites and parametric and any(_width(m) is None for m in modules.values()):
        raise UnsupportedModelError(
            f"{type(model).__name__}'s norms have no parameters (a non-parametric LayerNorm): "
            "there is no gamma or beta for the LayerNorm page and `ablate` to read"
        )
    if not sites:
        raise UnsupportedModelError(
            f"{type(model).__name__} model has no LayerNorm/RMSNorm of width {width}; the LayerNorm "
            "page and `ablate` need a Transformer with per-layer norms"
        )
    return sites


def norms_of(loaded: LoadedModel) -> list[NormSite]:
    """:func:`find_norms` of a :class:`isoscope.engine.load.models.LoadedModel` (head norms included if loaded)."""
    return find_norms(
        loaded.model, num_layers=loaded.info.num_layers, width=loaded.info.hidden_size
    )


def is_pre_ln(sites: list[NormSite]) -> bool:
    return any(s.role in ("pre_attn", "pre_mlp", "final") for s in sites)


def default_roles(sites: list[NormSite]) -> tuple[str, ...]:
    """Norms the detection and ablation use by default: the output LN of every layer (Busters);
    for pre-LN models, which have none, the two per-layer norms."""
    return _PRE_LN_ORDER if is_pre_ln(sites) else ("out",)


def select_norms(
    sites: list[NormSite], which: list[str] | tuple[str, ...] | str | None = None
) -> list[NormSite]:
    """Norms by canonical name or role (``"out"``, ``"L3.out_ln"``, ``"all"``); None -> defaults.

    ``"all"`` means every norm except the MLM head's (the head only when named explicitly).
    """
    if which is None:
        which = default_roles(sites)
    if isinstance(which, str):
        which = [w.strip() for w in which.split(",") if w.strip()]
    chosen: list[NormSite] = []
    by_name = {s.name: s for s in sites}
    for item in which:
        if item == "all":
            matches = [s for s in sites if s.role != "head"]
        elif item in by_name:
            matches = [by_name[item]]
        elif item in ROLES:
            matches = [s for s in sites if s.role == item]
        else:
            raise InputError(
                f"unknown LayerNorm {item!r}; use 'all', a role ({', '.join(ROLES)}) or a name such as "
                f"{', '.join(list(by_name)[:4])}"
            )
        chosen.extend(m for m in matches if m not in chosen)
    if not chosen:
        raise InputError(
            f"no LayerNorm matches {', '.join(which)}; this model has {', '.join(by_name)}"
        )
    return [s for s in sites if s in chosen]  # model order


@dataclass(frozen=True)
class LNParams:
    """gamma and beta of a set of norms as float64 (n_norms, d); beta is 0 where a norm has none."""

    names: list[str]
    roles: list[str]
    gamma: np.ndarray
    beta: np.ndarray
    has_bias: np.ndarray  # bool (n_norms,)

    def to_frame(self):
        """Long table: one row per (norm, dim) with gamma and beta."""
        import pandas as pd  # lazy: a slow import that only the table views need

        n, d = self.gamma.shape
        return pd.DataFrame(
            {
                "norm": np.repeat(self.names, d),
                "role": np.repeat(self.roles, d),
                "dim": np.tile(np.arange(d), n),
                "gamma": self.gamma.ravel(),
                "beta": self.beta.ravel(),
            }
        )


def ln_params(sites: list[NormSite]) -> LNParams:
    """Copy the parameters of ``sites`` to CPU float64: the effective gamma (weight + the family's
    offset) and beta (0 for RMSNorm, which has none)."""
    gamma = np.stack(
        [to_numpy(cast(torch.Tensor, s.module.weight)) + s.gamma_offset for s in sites]
    )
    beta = np.stack(
        [
            to_numpy(cast(torch.Tensor, s.module.bias)) if s.has_bias else np.zeros(gamma.shape[1])
            for s in sites
        ]
    )
    return LNParams(
        [s.name for s in sites],
        [s.role for s in sites],
        gamma,
        beta,
        np.array([s.has_bias for s in sites], dtype=bool),
    )


def flag_params(values: np.ndarray, k: float = LN_THRESHOLDS.k) -> np.ndarray:
    """Per row (one norm), dims whose value lies more than ``k`` std from the row's mean: bool (n, d).

    A row with (numerically) zero spread, like a fresh LayerNorm (gamma 1, beta 0), flags nothing.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    mean = values.mean(axis=1, keepdims=True)
    std = values.std(axis=1, keepdims=True)
    tiny = 1e-12 * np.maximum(1.0, np.abs(mean))
    flagged = np.abs(values - mean) > k * std
    return flagged & (std > tiny)


@dataclass(frozen=True)
class LNOutliers:
    """Detection result. ``weight_flags``/``bias_flags``: bool (n_norms, d) for the norms used;
    ``weight_layers``/``bias_layers``: int (d,) how many of them flag each dim; ``dims``: outliers
    (flagged in at least ``share`` of the norms, for gamma or for beta), sorted."""

    names: list[str]
    weight_flags: np.ndarray
    bias_flags: np.ndarray
    k: float
    share: float
    dims: list[int]

    @property
    def weight_layers(self) -> np.ndarray:
        return self.weight_flags.sum(axis=0)

    @property
    def bias_layers(self) -> np.ndarray:
        return self.bias_flags.sum(axis=0)

    @property
    def needed(self) -> int:
        return needed_layers(len(self.names), self.share)

    def table(self) -> list[dict]:
        """``[{"dim", "weight_layers", "bias_layers"}, ...]`` for the outlier dims (JSON shape)."""
        w, b = self.weight_layers, self.bias_layers
        return [
            {"dim": int(j), "weight_layers": int(w[j]), "bias_layers": int(b[j])} for j in self.dims
        ]

    def per_norm_counts(self) -> list[dict]:
        """How many dims each norm flags (gamma, beta): the 'counted per layer' table."""
        return [
            {
                "norm": n,
                "gamma outliers": int(self.weight_flags[i].sum()),
                "beta outliers": int(self.bias_flags[i].sum()),
                "gamma dims": ", ".join(map(str, np.flatnonzero(self.weight_flags[i]))),
                "beta dims": ", ".join(map(str, np.flatnonzero(self.bias_flags[i]))),
            }
            for i, n in enumerate(self.names)
        ]


def needed_layers(n_norms: int, share: float) -> int:
    """Smallest number of norms that is at least ``share`` of ``n_norms`` (and at least 1)."""
    return max(1, math.ceil(share * n_norms - 1e-9))


def detect_outliers(
    params: LNParams, k: float = LN_THRESHOLDS.k, share: float = LN_THRESHOLDS.share
) -> LNOutliers:
    """BERT Busters' criterion (:class:`LayerNormThresholds`): per norm, flag gamma_j (and
    separately beta_j) with |x - mean| > k std; dim j is an outlier when gamma_j or beta_j is
    flagged in at least ``share`` of the norms."""
    LayerNormThresholds(k, share)  # validates both
    weight_flags = flag_params(params.gamma, k)
    bias_flags = flag_params(params.beta, k) & params.has_bias[:, None]
    need = needed_layers(len(params.names), share)
    hit = (weight_flags.sum(axis=0) >= need) | (bias_flags.sum(axis=0) >= need)
    return LNOutliers(
        list(params.names),
        weight_flags,
        bias_flags,
        float(k),
        float(share),
        [int(j) for j in np.flatnonzero(hit)],
    )


def ln_outliers(
    loaded: LoadedModel,
    which=None,
    k: float = LN_THRESHOLDS.k,
    share: float = LN_THRESHOLDS.share,
) -> LNOutliers:
    """Detect LN outlier dims of a loaded model over the norms ``which`` (default: :func:`default_roles`)."""
    return detect_outliers(ln_params(select_norms(norms_of(loaded), which)), k, share)
