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

Either kind: ``L{i}.norm{k}`` (``other``) for a further norm inside layer i (k = 3, 4, ... in
module order) and ``head.ln`` (``head``) for the MLM head's transform LayerNorm.

Norms are found by type (``nn.LayerNorm`` or any module whose class name ends in ``LayerNorm``
or ``RMSNorm``) with a weight of the model width; RMSNorm has no beta (treated as absent).
A model is pre-LN when its base model has a norm after the last layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from backend.errors import InputError, UnsupportedModelError

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
_POST_LN_ORDER = ("attn", "out")
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

    @property
    def has_bias(self) -> bool:
        return getattr(self.module, "bias", None) is not None


def _is_norm(module: torch.nn.Module, width: int) -> bool:
    name = type(module).__name__
    if not (isinstance(module, torch.nn.LayerNorm) or name.endswith(("LayerNorm", "RMSNorm"))):
        return False
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.Tensor) and weight.ndim == 1 and weight.shape[0] == width


def _layer_list(
    encoder: torch.nn.Module, num_layers: int
) -> tuple[str, torch.nn.ModuleList] | None:
    """The ModuleList of the ``num_layers`` Transformer blocks (``encoder.layer``, ``h``, ``layers``)."""
    for path, module in encoder.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == num_layers and num_layers > 0:
            return path, module
    return None


def find_norms(
    model: torch.nn.Module, *, num_layers: int | None = None, width: int | None = None
) -> list[NormSite]:
    """All norms of ``model`` (a base model or a ``*ForMaskedLM``), named canonically, in model order.

    Raises :class:`UnsupportedModelError` when none are found or they are not per layer.
    """
    config = model.config
    num_layers = int(num_layers or getattr(config, "num_hidden_layers", 0) or 0)
    width = int(width or getattr(config, "hidden_size", 0) or 0)
    base = getattr(model, "base_model", None)
    base = base if isinstance(base, torch.nn.Module) else model
    base_prefix = next((p for p, m in model.named_modules() if m is base), "")
    kind = f"{type(model).__name__} ({getattr(config, 'model_type', '?')})"
    found = _layer_list(base, num_layers)
    all_norms = [(p, m) for p, m in model.named_modules() if _is_norm(m, width)]
    if not all_norms:
        raise UnsupportedModelError(
            f"{kind} has no LayerNorm/RMSNorm of width {width}; the LayerNorm page and `ablate` need "
            "a Transformer with LayerNorms (BERT, RoBERTa, DistilBERT, ELECTRA, GPT-2, Llama-style ...)"
        )
    if found is None:
        raise UnsupportedModelError(
            f"{kind} has norms but no list of {num_layers} layers to assign them to (e.g. ALBERT shares "
            "one layer); use a model with one block per layer"
        )
    layers_path, layers = found
    layers_full = f"{base_prefix}.{layers_path}" if base_prefix else layers_path
    block_path = {f"{layers_full}.{i}": i for i in range(len(layers))}
    # Pre-LN: a norm in the base model registered after the layer list (GPT-2 ln_f, Llama norm).
    order = [p for p, _ in model.named_modules()]
    layers_pos = order.index(layers_full)
    base_paths = {
        f"{base_prefix}.{p}" if base_prefix and p else (base_prefix or p)
        for p, _ in base.named_modules()
    }
    in_layers = [p for p, _ in all_norms if any(p.startswith(bp + ".") for bp in block_path)]
    after = [
        p
        for p, _ in all_norms
        if p in base_paths and p not in in_layers and order.index(p) > layers_pos
    ]
    pre_ln = bool(after)
    per_layer_names = _PRE_LN_ORDER if pre_ln else _POST_LN_ORDER

    sites: list[NormSite] = []
    per_layer_count: dict[int, int] = {}
    head_count = sum(1 for p, _ in all_norms if p not in base_paths)
    head_seen = 0
    for path, module in all_norms:
        layer = next((i for bp, i in block_path.items() if path.startswith(bp + ".")), None)
        if layer is not None:
            k = per_layer_count.get(layer, 0)
            per_layer_count[layer] = k + 1
            role = per_layer_names[k] if k < 2 else "other"
            name = f"L{layer + 1}.{role}_ln" if role != "other" else f"L{layer + 1}.norm{k + 1}"
            sites.append(NormSite(name, role, layer + 1, path, module))
        elif path not in base_paths:
            head_seen += 1
            name = "head.ln" if head_count == 1 else f"head.ln{head_seen}"
            sites.append(NormSite(name, "head", None, path, module))
        elif order.index(path) > layers_pos:
            sites.append(NormSite("final_ln", "final", None, path, module))
        else:
            sites.append(NormSite("emb.ln", "emb", None, path, module))
    names = [s.name for s in sites]
    if len(set(names)) != len(names):
        raise UnsupportedModelError(
            f"{kind}: cannot name its norms unambiguously ({', '.join(names)})"
        )
    return sites


def norms_of(loaded) -> list[NormSite]:
    """:func:`find_norms` of a :class:`backend.models.LoadedModel` (head norms included if loaded)."""
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
        import pandas as pd

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
    """Copy the parameters of ``sites`` to CPU float64."""
    gamma = np.stack([s.module.weight.detach().to("cpu", torch.float64).numpy() for s in sites])
    beta = np.stack(
        [
            s.module.bias.detach().to("cpu", torch.float64).numpy()
            if s.has_bias
            else np.zeros(gamma.shape[1])
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


def flag_params(values: np.ndarray, k: float = 3.0) -> np.ndarray:
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


def detect_outliers(params: LNParams, k: float = 3.0, share: float = 0.5) -> LNOutliers:
    """BERT Busters' criterion: per norm, flag gamma_j (and separately beta_j) with
    |x - mean| > k std; dim j is an outlier when gamma_j or beta_j is flagged in at least
    ``share`` of the norms."""
    if not k > 0:
        raise InputError(f"k (standard deviations) must be positive, got {k}")
    if not 0 < share <= 1:
        raise InputError(f"the share of layers must be in (0, 1], got {share}")
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


def ln_outliers(loaded, which=None, k: float = 3.0, share: float = 0.5) -> LNOutliers:
    """Detect LN outlier dims of a loaded model over the norms ``which`` (default: :func:`default_roles`)."""
    return detect_outliers(ln_params(select_norms(norms_of(loaded), which)), k, share)
