"""The surgery: zero gamma_j and beta_j of chosen LayerNorm dims and restore them bit-for-bit
(:func:`ablated`), or mask the norm outputs per batch row with hooks (:func:`masked_norms`); random
control dims and the private copy that keeps the shared model untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
import torch

from isoscope.analysis.layernorm.params import NormSite, find_norms, norms_of, select_norms
from isoscope.analysis.projections.postprocess import parse_dims as parse_typed_dims
from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.errors import InputError
from isoscope.engine.load.models import (
    LoadedModel,
    private_copy,  # noqa: F401 - re-exported for the ablation
    resolve_folder,
)
from isoscope.engine.load.source import parse_source


def parse_dims(text: str | Sequence[int], width: int) -> list[int]:
    """``"127, 223"`` or ``[127, 223]`` -> sorted unique ints in [0, width); at least one."""
    dims = parse_typed_dims(text, width)
    if not dims:
        raise InputError(
            f"no dimensions to ablate; type integers between 0 and {width - 1} separated by commas"
        )
    return dims


def _sites_for(
    model_or_loaded: torch.nn.Module | LoadedModel, norms
) -> tuple[torch.nn.Module, list[NormSite], int]:
    model = cast(torch.nn.Module, getattr(model_or_loaded, "model", model_or_loaded))
    config: Any = model.config
    width = int(config.hidden_size)
    if (
        norms is not None
        and not isinstance(norms, str)
        and len(norms)
        and isinstance(norms[0], NormSite)
    ):
        return model, list(norms), width
    sites = (
        norms_of(cast(LoadedModel, model_or_loaded))
        if hasattr(model_or_loaded, "info")
        else find_norms(model)
    )
    return model, select_norms(sites, norms), width


@contextmanager
def ablated(
    model_or_loaded: torch.nn.Module | LoadedModel, dims: Sequence[int], norms=None
) -> Iterator[list[NormSite]]:
    """Set gamma_j = beta_j = 0 for ``dims`` in ``norms`` (names/roles, NormSites, or None for the
    output LN of every layer; the MLM head LN only when named, e.g. ``["out", "head"]``).

    The original parameters are restored exactly in ``finally``, even if the body raises.
    Yields the NormSites that were changed.
    """
    model, sites, width = _sites_for(model_or_loaded, norms)
    dims = parse_dims(list(dims), width)
    index = torch.as_tensor(dims, dtype=torch.long)
    saved: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]] = []
    try:
        with torch.no_grad():
            for site in sites:
                weight = cast(torch.Tensor, site.module.weight)
                bias = cast(torch.Tensor, site.module.bias) if site.has_bias else None
                saved.append(
                    (
                        weight,
                        weight.detach().clone(),
                        bias,
                        None if bias is None else bias.detach().clone(),
                    )
                )
                weight[index.to(weight.device)] = -site.gamma_offset  # effective gamma 0
                if bias is not None:
                    bias[index.to(bias.device)] = 0
        yield sites
    finally:
        with torch.no_grad():
            for weight, weight_copy, bias, bias_copy in saved:
                weight.copy_(weight_copy)
                if bias is not None:
                    assert bias_copy is not None  # saved with its bias
                    bias.copy_(bias_copy)


@contextmanager
def masked_norms(sites: list[NormSite], mask: torch.Tensor) -> Iterator[None]:
    """Multiply every norm output by ``mask`` ((batch, 1, d) of 0/1) via forward hooks; batch row
    r carries its own ablation. Equivalent to zeroing gamma_j, beta_j where ``mask[r, 0, j] == 0``."""
    with forward_hooks({s.module: lambda _m, _i, out: out * mask.to(out.dtype) for s in sites}):
        yield


def has_mlm_checkpoint(source: str) -> bool:
    """True when the checkpoint's config names a masked-LM architecture, so ``head="mlm"`` loads
    trained head weights (AutoModelForMaskedLM on a base checkpoint would invent a random head)."""
    try:
        parsed = parse_source(source)
        if parsed.is_random:
            return False
        folder, _ = resolve_folder(parsed)
        archs = json.loads((folder / "config.json").read_text()).get("architectures") or []
    except Exception:
        return False
    return any(a.endswith("ForMaskedLM") or a == "BertForPreTraining" for a in archs)


def random_control_dims(
    width: int, exclude: Sequence[int], size: int, seed: int, index: int
) -> list[int]:
    """``size`` random dims not in ``exclude`` (control ``index`` of ``seed``; reproducible)."""
    pool = np.setdiff1d(np.arange(width), np.asarray(list(exclude), dtype=np.int64))
    if size > len(pool):
        raise InputError(
            f"cannot draw {size} random control dims from the {len(pool)} dims not ablated; ablate fewer dims"
        )
    rng = np.random.default_rng([int(seed), int(index)])
    return sorted(int(j) for j in rng.choice(pool, size=size, replace=False))
