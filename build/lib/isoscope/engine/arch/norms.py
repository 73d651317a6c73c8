"""Norms and projections as the traced pass sees them: the :class:`Norm`, :class:`Wiring` and
:class:`ProjectionInput` records, and the tests read from a module itself (is it a norm, a
projection, LayerNorm or RMSNorm, Gemma's 1 + weight)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from isoscope.engine.errors import UnsupportedModelError

NORM_ROLES = ("emb", "attn", "out", "pre_attn", "pre_mlp", "other", "final", "head")


@dataclass(frozen=True)
class Norm:
    """One norm of a model: its ``path`` in the full model, ``role`` (:data:`NORM_ROLES`),
    0-based ``layer`` (None outside the blocks), ``kind`` (``layernorm`` or ``rmsnorm``),
    ``gamma_offset`` (effective gamma = weight + offset; Gemma: 1), its output ``width`` and the
    projections its output is the input of (``feeds``: paths; ``feeds_block``: those inside a
    Transformer block)."""

    path: str
    role: str
    layer: int | None
    kind: str
    gamma_offset: float
    width: int
    feeds: tuple[str, ...]
    feeds_block: tuple[str, ...]
    gated: bool = False  # the norm takes a gate (:func:`gate_argument`)


@dataclass(frozen=True)
class Wiring:
    """Every norm of a model in forward order, from one traced forward pass (:func:`wiring`).
    ``post_ln``: a block's output is a norm's output (BERT); ``blocks``: path of the block list."""

    norms: tuple[Norm, ...]
    blocks: str
    num_layers: int
    post_ln: bool

    def modules(self, model: torch.nn.Module) -> dict[str, torch.nn.Module]:
        named = dict(model.named_modules())
        return {n.path: named[n.path] for n in self.norms}


@dataclass(frozen=True)
class ProjectionInput:
    """One call of a projection inside a Transformer block in the traced forward pass of
    :func:`projection_inputs`, in call order: its ``path`` in the traced model, 0-based ``layer``,
    the ``width`` of its input, ``shared``: the index (in the same tuple) of the first call whose
    input is the very same tensor (q/k/v, gate/up, a parallel block's attention and MLP; its own
    index when none before), and ``norm``: the path of the norm whose output it is (the rule of
    :attr:`Norm.feeds`: shared storage, else equal rows), or None; ``rows``: how many rows (tokens)
    the input holds, and ``plain``: whether the module returned one tensor."""

    path: str
    layer: int
    width: int
    shared: int
    norm: str | None
    rows: int = 0  # the rows (tokens) of the input: a routed expert sees fewer than its block
    plain: bool = True  # the module returned one tensor (a router may return a tuple)


def is_norm(module: torch.nn.Module) -> bool:
    """A normalisation module: LayerNorm / RMSNorm / GroupNorm, or a leaf module whose class name
    says norm (LlamaRMSNorm, T5LayerNorm, Gemma2RMSNorm ...)."""
    if isinstance(module, torch.nn.LayerNorm | torch.nn.RMSNorm | torch.nn.GroupNorm):
        return True
    if type(module).__module__.startswith("torch.nn.utils."):
        return False  # weight / spectral norm parametrizations reshape weights, not activations
    return "norm" in type(module).__name__.lower() and not list(module.children())


def normalises_last_axis(module: torch.nn.Module, out: torch.Tensor) -> bool:
    """False for a norm over channels first, (B, C, T), as wav2vec2's group norm over the conv
    features: its weight is as wide as axis 1, not as the last axis, which holds time."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 1:
        return True
    return out.ndim < 3 or int(weight.shape[0]) == int(out.shape[-1])


def is_projection(module: torch.nn.Module) -> bool:
    if isinstance(module, torch.nn.Embedding) or is_norm(module):
        return False
    return any(p.ndim >= 2 for p in module.parameters(recurse=False))


def first_tensor(args: tuple, kwargs: dict) -> torch.Tensor | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.ndim >= 2:
            return value
    return None


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1, x.shape[-1]).float()


def same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except Exception:
        return False


def rows_within(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Every row of ``x`` equals (to bf16 precision) some row of ``y``."""
    if x.shape[-1] != y.shape[-1] or x.numel() == 0:
        return False
    rx, ry = _rows(x).cpu(), _rows(y).cpu()
    if len(rx) > len(ry):
        return False
    scale = ry.abs().amax(dim=1).clamp_min(1e-6)  # (m,)
    diff = (rx[:, None, :] - ry[None, :, :]).abs().amax(dim=2) / scale[None, :]  # (n, m)
    return bool((diff.amin(dim=1) <= 1e-2).all())


def gate_argument(module: torch.nn.Module) -> str | None:
    """The name of the gate a gated norm's forward takes (``gate``: the gated RMSNorm of Mamba-2
    and Gated DeltaNet mixers, ``norm(x) * act(gate)`` or ``norm(x * act(gate))``), else None."""
    try:
        params = list(inspect.signature(type(module).forward).parameters)
    except (TypeError, ValueError):
        return None
    return "gate" if "gate" in params[2:] else None


def norm_kind(
    module: torch.nn.Module, width: int, shape: tuple[int, ...] | None = None
) -> tuple[str, float]:
    """``(kind, gamma_offset)`` of a norm from the module itself: ``layernorm`` when shifting the
    input by a constant leaves the output unchanged (mean subtraction), else ``rmsnorm``; the
    gamma offset is what the output is made of with the weight zeroed (Gemma: 1 + weight). A gated
    norm is given a constant gate, which scales its output by one constant and changes neither.
    ``shape``: the shape the traced pass gave the norm (a norm that takes only 4-D input is probed
    with one of that rank); (2, 3, width) when None."""
    param = next(module.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    gen = torch.Generator().manual_seed(0)
    probe = tuple(shape) if shape is not None and shape[-1] == width else (2, 3, width)
    x = torch.randn(*probe, generator=gen).to(device=device, dtype=dtype)
    gate = gate_argument(module)
    extra = {gate: torch.full_like(x, 3.0)} if gate else {}
    weight = getattr(module, "weight", None)
    bias = getattr(module, "bias", None)
    with torch.no_grad():
        saved = [(t, t.detach().clone()) for t in (weight, bias) if isinstance(t, torch.Tensor)]
        try:
            if isinstance(weight, torch.Tensor):
                weight.fill_(1.0)
            if isinstance(bias, torch.Tensor):
                bias.zero_()
            try:
                one = module(x, **extra).float()
            except Exception as exc:  # e.g. xLSTM's norm over (B, T, heads, d_head) only
                raise UnsupportedModelError(
                    f"{type(module).__name__} does not normalise a (batch, tokens, {width}) "
                    f"input ({type(exc).__name__}); isoscope's norm views read norms over the "
                    "last axis of the token states"
                ) from None
            shifted = module(x + 3.0, **extra).float()
            offset = 0.0
            if isinstance(weight, torch.Tensor):
                weight.zero_()
                zero = module(x, **extra).float()
                big = (one - zero).abs() > 1e-3
                if bool(big.any()) and float(zero.abs().max()) > 1e-4:
                    offset = round(float((zero[big] / (one - zero)[big]).median()), 3)
        finally:
            for tensor, value in saved:
                tensor.copy_(value)
    kind = "layernorm" if torch.allclose(one, shifted, rtol=1e-2, atol=1e-2) else "rmsnorm"
    return kind, offset


def attention_side(block: torch.nn.Module, rel: str) -> bool:
    """Whether a projection at ``rel`` (path inside a block) belongs to the attention."""
    child = rel.split(".")[0]
    module = getattr(block, child, None)
    name = type(module).__name__.lower() if module is not None else ""
    return "attn" in child.lower() or "attention" in child.lower() or "attention" in name
