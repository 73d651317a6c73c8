"""The direct contributions to h_l . u, as exact arithmetic on one forward pass.

Pre-norm residual stacks (Elhage et al. 2021): h_l = h_0 + sum_{i<=l} (a_i + m_i), with a_i
what layer i's token mixer adds (attention, Mamba, DeltaNet, a convolution) and m_i what its MLP
or MoE adds. a_i is read as (the input of the layer's pre-MLP norm) - (the block's input) and m_i
as (the block's output) - (that norm's input), so norms inside a sub-layer (Gemma-2's
post-attention norm) belong to it; a block with no pre-MLP norm (Mamba, a parallel block) is one
row.

Post-norm stacks (BERT, MiniLM; Kobayashi et al. 2021, arXiv 2109.07152): with each norm's mean
and scale frozen at their values for the token, LN(x) . v = (1 / s) (c(gamma * v)) . x + beta . v,
c() centring (LayerNorm) or not (RMSNorm). Walking back from the state, the vector a component is
read along is data-independent (``reader``) and only the per-token factor 1 / s of the norms
passed changes, so the forward hooks project every tensor they see onto a fixed vector at once
(no (tokens x width) tensor is kept): a component contributes (its projection) x (the product of
the 1 / s it passes), a norm's beta its own constant term. The same walk passes the final norm when
state L is the final norm's output (pre-norm decoders). The rows sum to the value on every token;
:func:`contributions` returns that check.

Attention splits by head where the output projection's output is what the mixer adds: head h
contributes (z^h W_O^h) . v (the projection's input z, read per head) and the bias b_O . v is a
row of its own. A routed-expert module called as ``experts(x, top_k_index, top_k_weights)``
splits by expert: each expert is run on its own tokens by routing the others to the skip slot, so
the split costs one more run of the experts; the MLP's rest (a shared expert) stays a row.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np
import torch

from isoscope.analysis.quant.sites import weight_matrix
from isoscope.engine.arch import Norm, Wiring, architecture, blocks_of, projection_inputs
from isoscope.engine.device import to_numpy
from isoscope.engine.errors import UnsupportedModelError

SPLIT_TOLERANCE = 1e-4  # relative: a head / expert split is kept when it sums to its row to this


@dataclass(frozen=True)
class Row:
    """One term of the decomposition before the pass: per token
    ``(sum(sign * probe) + const) * prod(1 / s for s in scales)``. ``layer``: 0 for the
    embeddings, 1..L; ``component``: embedding, mixer, attention head, attention bias, mlp,
    expert, norm bias, offset; ``index``: the head or expert; ``norm``: the norm's path for a
    norm-bias row."""

    layer: int
    component: str
    probes: tuple[tuple[float, str], ...] = ()
    const: float = 0.0
    scales: tuple[str, ...] = ()
    index: int | None = None
    norm: str | None = None
    group: str | None = None  # the row a split (heads, experts) replaces, checked after the pass


@dataclass
class Plan:
    """What the hooks measure (``probes``: (module, "in" | "out") -> [(name, vector)];
    ``scales``: norm module -> (name, kind, eps); ``heads``: output projection -> (name, (H, dh)
    reading); ``experts``: experts module -> (name, vector)) and the rows built from them."""

    rows: list[Row] = field(default_factory=list)
    probes: dict = field(default_factory=dict)
    scales: dict = field(default_factory=dict)
    heads: dict = field(default_factory=dict)
    experts: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    final_norm: bool = False


def norm_parameters(module: torch.nn.Module, norm: Norm, width: int):
    """(effective gamma, beta or None, eps) of a norm as float64 numpy arrays."""
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.shape == (width,):
        gamma = to_numpy(weight) + norm.gamma_offset
    else:
        gamma = np.ones(width)
    bias = getattr(module, "bias", None)
    beta = to_numpy(bias) if isinstance(bias, torch.Tensor) and bias.shape == (width,) else None
    eps = next(
        (
            float(getattr(module, a))
            for a in ("eps", "variance_epsilon", "epsilon")
            if isinstance(getattr(module, a, None), int | float)
        ),
        None,
    )
    if eps is None:  # not an attribute (OLMo's norm passes a constant): read from the module
        eps = measured_eps(module, norm.kind, gamma, beta)
    return gamma, beta, eps


EPS_PROBE = 1e-2  # amplitude of the input :func:`measured_eps` runs a norm on (variance its square)


def measured_eps(module: torch.nn.Module, kind: str, gamma: np.ndarray, beta) -> float:
    """The epsilon a norm adds to the variance (LayerNorm) or mean square (RMSNorm), read from one
    call on an input of known, small spread: +-a alternating, so y_j = gamma_j x_j / sqrt(a'^2 +
    eps) + beta_j at the coordinate with the largest gamma. 0 when the module cannot be called so."""
    width = len(gamma)
    x = np.zeros(width)
    x[: width - width % 2] = np.tile([EPS_PROBE, -EPS_PROBE], width // 2)
    spread = float(np.mean(x**2))  # the variance and the mean square alike: the mean is 0
    param = next(module.parameters(), None)
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    device = param.device if param is not None else torch.device("cpu")
    try:
        with torch.inference_mode():
            y = module(torch.as_tensor(x[None], dtype=dtype, device=device))
    except Exception:  # a module that is not a plain norm: no epsilon read
        return 0.0
    y = y[0] if isinstance(y, tuple | list) else y
    if not isinstance(y, torch.Tensor) or y.shape[-1] != width:
        return 0.0
    y = to_numpy(y.reshape(-1, width)[0]) - (0.0 if beta is None else beta)
    j = int(np.argmax(np.abs(gamma * x)))
    if not y[j] or not gamma[j] * x[j]:
        return 0.0
    return max(float((gamma[j] * x[j] / y[j]) ** 2) - spread, 0.0)


def norm_scale(x: torch.Tensor, kind: str, eps: float) -> torch.Tensor:
    """The per-token scale s a norm divides by: sqrt(var + eps) (LayerNorm) or sqrt(mean x^2 + eps)."""
    x = x.float()
    if kind == "layernorm":
        return torch.sqrt(x.var(dim=-1, unbiased=False) + eps)
    return torch.sqrt(x.pow(2).mean(dim=-1) + eps)


def through_norm(v: np.ndarray, gamma: np.ndarray, kind: str) -> np.ndarray:
    """The reading vector before a frozen norm, given the one after it (without the 1 / s)."""
    w = gamma * v
    return w - w.mean() if kind == "layernorm" else w


class _Builder:
    def __init__(self, model: torch.nn.Module, wired: Wiring) -> None:
        self.model = model
        self.named = dict(model.named_modules())
        self.wired = wired
        self.plan = Plan()
        self.count = 0

    def probe(self, module: torch.nn.Module, where: str, v: np.ndarray) -> str:
        name = f"p{self.count}"
        self.count += 1
        self.plan.probes.setdefault((module, where), []).append((name, v.copy()))
        return name

    def scale(self, norm: Norm) -> str:
        module = self.named[norm.path]
        if module not in self.plan.scales:
            _, _, eps = norm_parameters(module, norm, norm.width)
            self.plan.scales[module] = (f"s:{norm.path}", norm.kind, eps)
        return self.plan.scales[module][0]

    def pass_norm(self, norm: Norm, v: np.ndarray, scales: tuple, layer: int) -> tuple:
        module = self.named[norm.path]
        gamma, beta, _ = norm_parameters(module, norm, norm.width)
        if beta is not None:
            self.plan.rows.append(
                Row(layer, "norm bias", const=float(beta @ v), scales=scales, norm=norm.path)
            )
        return through_norm(v, gamma, norm.kind), (*scales, self.scale(norm))


def build_plan(loaded, u: np.ndarray, state: int, final_norm: bool) -> Plan:
    """The rows and probes of h . u for h the output of the first ``state`` blocks (0: the
    embeddings), passed through the final norm when ``final_norm`` (a pre-norm decoder's
    ``last_hidden_state``) (module doc)."""
    model = loaded.model
    wired = _wiring(loaded)
    found = blocks_of(model)
    if found is None:
        raise UnsupportedModelError("the model has no list of per-layer blocks to decompose")
    _, blocks = found
    b = _Builder(model, wired)
    by_layer: dict[int, dict[str, Norm]] = {}
    for norm in wired.norms:
        if norm.layer is not None:
            by_layer.setdefault(norm.layer, {}).setdefault(norm.role, norm)
    heads = _head_projections(loaded)
    experts = _expert_modules(blocks)
    v, scales = np.asarray(u, dtype=np.float64), ()
    L = len(blocks)
    if final_norm:
        final = next(n for n in wired.norms if n.role == "final")
        v, scales = b.pass_norm(final, v, scales, L)
        b.plan.final_norm = True
    for i in range(state, 0, -1):
        block = blocks[i - 1]
        norms = by_layer.get(i - 1, {})
        if wired.post_ln and "out" in norms and "attn" in norms:
            out_norm, attn_norm = norms["out"], norms["attn"]
            v, scales = b.pass_norm(out_norm, v, scales, i)
            into = b.named[out_norm.path]
            after_attn = b.named[attn_norm.path]
            b.plan.rows.append(
                Row(
                    i,
                    "mlp",
                    ((1, b.probe(into, "in", v)), (-1, b.probe(after_attn, "out", v))),
                    scales=scales,
                )
            )
            _split_experts(b, experts.get(i - 1), v, scales, i)
            v, scales = b.pass_norm(attn_norm, v, scales, i)
            mixer = ((1, b.probe(after_attn, "in", v)), (-1, b.probe(block, "in", v)))
        else:
            pre_mlp = norms.get("pre_mlp")
            if pre_mlp is not None and not wired.post_ln:
                mid = b.named[pre_mlp.path]
                b.plan.rows.append(
                    Row(
                        i,
                        "mlp",
                        ((1, b.probe(block, "out", v)), (-1, b.probe(mid, "in", v))),
                        scales=scales,
                    )
                )
                _split_experts(b, experts.get(i - 1), v, scales, i)
                mixer = ((1, b.probe(mid, "in", v)), (-1, b.probe(block, "in", v)))
            else:  # one row for the whole block (a Mamba block; a parallel block)
                mixer = ((1, b.probe(block, "out", v)), (-1, b.probe(block, "in", v)))
        b.plan.rows.append(Row(i, "mixer", mixer, scales=scales))
        _split_heads(b, heads.get(i - 1), v, scales, i)
    emb = next((n for n in wired.norms if n.role == "emb"), None)
    if wired.post_ln and emb is not None and blocks and emb.width == len(v):
        v, scales = b.pass_norm(emb, v, scales, 0)
        b.plan.rows.append(
            Row(0, "embedding", ((1, b.probe(b.named[emb.path], "in", v)),), scales=scales)
        )
    elif blocks:
        b.plan.rows.append(Row(0, "embedding", ((1, b.probe(blocks[0], "in", v)),), scales=scales))
    return b.plan


def _wiring(loaded) -> Wiring:
    from isoscope.engine.arch import wiring

    return wiring(loaded)


def _head_projections(loaded) -> dict[int, tuple[torch.nn.Module, int]]:
    """Per 0-based layer, the attention's output projection and its head count: the family
    table's ``attention_output`` when it is a projection, else the last projection the traced
    pass saw called inside the attention module; kept where its output is the model's width and
    its input splits evenly into heads."""
    try:
        arch = architecture(loaded)
        calls = projection_inputs(loaded)
    except UnsupportedModelError:
        return {}
    named = dict(loaded.model.named_modules())
    found: dict[int, tuple[torch.nn.Module, int]] = {}
    heads = arch.num_heads
    for layer in arch.layers:
        proj: torch.nn.Module | None = layer.attention_output
        if not _is_matrix(proj):
            inside = arch.path(layer.attention) + "."
            last = [c.path for c in calls if c.layer == layer.index and c.path.startswith(inside)]
            proj = named.get(last[-1]) if last else None
        if not heads or proj is None or not _is_matrix(proj):
            continue
        out_width, in_width = (int(n) for n in weight_matrix(proj).shape)
        if out_width == arch.hidden_size and in_width % heads == 0:
            found[layer.index] = (proj, heads)
    return found


def _is_matrix(module) -> bool:
    weight = getattr(module, "weight", None)
    return isinstance(weight, torch.Tensor) and weight.ndim == 2 and not list(module.children())


def _expert_modules(blocks) -> dict[int, torch.nn.Module]:
    """Per 0-based layer, a routed-experts module called as ``(x, top_k_index, top_k_weights)``."""
    found: dict[int, torch.nn.Module] = {}
    for i, block in enumerate(blocks):
        for module in block.modules():
            try:
                params = inspect.signature(module.forward).parameters
            except (TypeError, ValueError):
                continue
            if "top_k_index" in params and "top_k_weights" in params:
                found[i] = module
                break
    return found


def _split_heads(b: _Builder, found, v: np.ndarray, scales: tuple, layer: int) -> None:
    if found is None:
        return
    proj, heads = found
    w = to_numpy(weight_matrix(proj))  # (out, in)
    if w.shape[0] != len(v):
        return
    reading = (w.T @ v).reshape(heads, -1)  # (H, dh): head h's input read along v
    name = f"h{b.count}"
    b.count += 1
    b.plan.heads.setdefault(proj, []).append((name, reading))
    group = f"mixer:{layer}"
    for h in range(heads):
        b.plan.rows.append(
            Row(layer, "attention head", ((1, f"{name}:{h}"),), scales=scales, index=h, group=group)
        )
    bias = getattr(proj, "bias", None)
    const = float(to_numpy(bias) @ v) if isinstance(bias, torch.Tensor) else 0.0
    b.plan.rows.append(Row(layer, "attention bias", const=const, scales=scales, group=group))


def _split_experts(b: _Builder, module, v: np.ndarray, scales: tuple, layer: int) -> None:
    if module is None:
        return
    count = _num_experts(module)
    if not count:
        return
    name = f"e{b.count}"
    b.count += 1
    b.plan.experts.setdefault(module, []).append((name, v.copy(), count))
    group = f"mlp:{layer}"
    for e in range(count):
        b.plan.rows.append(
            Row(layer, "expert", ((1, f"{name}:{e}"),), scales=scales, index=e, group=group)
        )
    b.plan.rows.append(Row(layer, "mlp rest", scales=scales, group=group))  # mlp - experts


def _num_experts(module: torch.nn.Module) -> int:
    count = getattr(module, "num_experts", None)
    if isinstance(count, int) and count > 0:
        return count
    for p in module.parameters(recurse=False):
        if p.ndim == 3:
            return int(p.shape[0])
    return 0
