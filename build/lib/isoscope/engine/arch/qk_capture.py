"""Queries and keys as a model's attention uses them, captured in one forward pass.

Two ways, decided from the model itself:

- **The attention call** (every modeling file that dispatches through transformers'
  ``ALL_ATTENTION_FUNCTIONS``: BERT, GPT-2, OPT, Llama, Qwen, Gemma, Mistral, Phi, GPT-NeoX,
  ModernBERT, ...). For the block, the model runs a registered attention implementation that
  records the query (B, H, T, d_h) and key (B, G, T, d_h) tensors it is handed (after the q/k
  norms and the rotary embedding, exactly as the attention uses them; keys before GQA's
  ``repeat_kv``), the mask the model built for it (causal, sliding window, padding) and the
  attention weights of the modeling file's own ``eager_attention_forward``.
- **The scores** (modeling files with their own attention code: GPT-J, GPT-Neo, CodeGen, BLOOM,
  Falcon, MPT, XLM, XLNet, DeBERTa, ...): the queries and keys are the operands of the product
  whose softmax is the attention, read from the computation itself
  (:func:`isoscope.engine.arch.scores.score_calls`), with the weights the module computed.
- **The projections**, for one case the scores cannot serve: queries and keys *before* a rotary
  embedding that the module applies in its own code (Falcon, RoFormer). Where q and k sit in the
  projection outputs cannot be discovered, so one :data:`QK_LAYOUTS` entry says it.

Rotary positions (Su et al. 2021, arXiv 2104.09864): the ``(cos, sin)`` the attention module is
given are recorded, and the modeling file's own ``apply_rotary_pos_emb`` rotates the vectors
(``applied``) or takes them back by the opposite angle (``before``), so partial rotary (Phi,
GPT-NeoX ``rotary_pct``) and every scaling are the model's own.
"""

from __future__ import annotations

import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.errors import UnsupportedModelError

IMPLEMENTATION = "isoscope_qk_capture"
# One lock for every switch of a model's attention implementation (this capture, and the eager
# attention of the sinks scan): a cached model is shared by the dashboard's threads.
ATTENTION_SWITCH = threading.RLock()
_RECORDERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # attention module -> fn
_registered = False


@dataclass(frozen=True)
class QKLayout:
    """Where q and k sit in the projections of an attention module whose modeling file has its own
    attention code (what cannot be discovered). The attention module is the first module of a
    block that has every named attribute. ``fused``: one projection whose output holds q, k, v,
    split by ``split``: a method of the attention module itself (``heads_axis`` of its outputs),
    ``"thirds"`` (q | k | v along the last axis) or ``"per_head"`` (per head q | k | v);
    otherwise ``query`` / ``key`` are separate projections."""

    name: str
    fused: str | None = None
    split: str | None = None
    heads_axis: int = 2
    query: str | None = None
    key: str | None = None


QK_LAYOUTS: tuple[QKLayout, ...] = (
    QKLayout("fused query_key_value, split by its own _split_heads (Falcon)", "query_key_value", "_split_heads"),
    QKLayout("fused query_key_value, split by its own _reshape (BLOOM)", "query_key_value", "_reshape", 1),
    QKLayout("fused Wqkv: q | k | v (MPT)", "Wqkv", "thirds"),
    QKLayout("fused in_proj, q | k | v per head (DeBERTa)", "in_proj", "per_head"),
    QKLayout("query_proj / key_proj (DeBERTa-v2)", query="query_proj", key="key_proj"),
    QKLayout("q / k / v / o (MPNet)", query="q", key="k"),
    QKLayout("query / key, own attention code (Megatron-BERT, RoFormer)", query="query", key="key"),
)  # fmt: skip


@dataclass
class Call:
    """One attention call of one layer: q (B, H, T, d_h), k (B, G, T, d_h), float64 on CPU,
    ``allowed`` (B, 1 or H, T, T) bool: the keys the model's mask lets each query see (None: the
    weights > 0), ``weights`` (B, H, T, T) float64, ``module``: the attention module and the
    rotary ``position_embeddings`` (cos, sin) it was given, if any, and the ``sliding_window`` the
    call was given (None: none)."""

    layer: int
    q: torch.Tensor
    k: torch.Tensor
    weights: torch.Tensor | None
    allowed: torch.Tensor | None
    module: torch.nn.Module
    position_embeddings: Any = None
    sliding_window: int | None = None


def uses_attention_interface(model: torch.nn.Module) -> bool:
    """Whether the attention modules' modeling file dispatches through transformers'
    attention-function registry (so the attention call can be recorded)."""
    names = {type(m).__module__ for m in model.modules() if "atten" in type(m).__name__.lower()}
    return any(
        hasattr(sys.modules.get(n), "ALL_ATTENTION_FUNCTIONS")
        and hasattr(sys.modules.get(n), "eager_attention_forward")
        for n in names
    )


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(IMPLEMENTATION, _recorded_attention)
    AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)
    _registered = True


def _recorded_attention(module, query, key, value, attention_mask, *args, **kwargs):
    """The modeling file's own eager attention, with q, k, mask and weights handed to the
    recorder of the running capture."""
    eager = sys.modules[type(module).__module__].eager_attention_forward
    output, weights = eager(module, query, key, value, attention_mask, *args, **kwargs)
    record = _RECORDERS.get(module)
    if record is not None:
        scaling = kwargs.get("scaling", args[0] if args else None)
        window = kwargs.get("sliding_window")
        record(module, query * query_scale(module, scaling), key, attention_mask, weights, window)
    return output, weights


def query_scale(module: torch.nn.Module, call_scaling: float | None) -> float:
    """What undoes a scale folded into the queries before the call: OPT and BART multiply
    q_proj's output by their ``scaling`` and call the attention with scaling 1.0; their
    queries are reported, as every other model's, as the projection gives them (so the logits
    are q . k times the module's own ``scaling``)."""
    own = getattr(module, "scaling", None)
    if not isinstance(own, int | float) or not isinstance(call_scaling, int | float) or own == 0:
        return 1.0
    return float(call_scaling) / float(own)


def allowed_keys(
    mask: torch.Tensor | None, shape: tuple[int, int, int] | None = None
) -> torch.Tensor | None:
    """The keys an additive (or boolean) attention mask leaves visible, (B, 1|H, Tq, Tk) bool.
    ``shape`` (B, Tq, Tk): a mask of another shape is brought to that one: a padding mask of
    (B, Tk), (B, Tq|1, Tk) or (B, 1|H, 1, Tk) is broadcast over the queries (T5-style and
    Switch Transformers' encoders hand one down), and a mask longer than the keys is cut."""
    if mask is None:
        return None
    allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
    if shape is None:
        return allowed
    batch, queries, keys = shape
    if allowed.ndim == 2:
        allowed = allowed[:, None, None, :]
    elif allowed.ndim == 3:
        allowed = allowed[:, None]
    allowed = allowed[..., -queries:, :keys] if allowed.shape[-2] > 1 else allowed[..., :keys]
    return allowed.expand(batch, allowed.shape[1], queries, keys)


def block_index(model: torch.nn.Module) -> dict[torch.nn.Module, int]:
    """Every module inside the per-layer blocks -> its block's index (0-based)."""
    from isoscope.engine.arch.lookup import blocks_of

    found = blocks_of(model)
    if found is None:
        raise UnsupportedModelError(
            "the queries/keys view needs a list of per-layer blocks; this model shares one layer "
            "module across its layers"
        )
    return {m: i for i, block in enumerate(found[1]) for m in block.modules()}


def _position_embedding_hooks(
    model: torch.nn.Module, store: dict[torch.nn.Module, Any]
) -> dict[torch.nn.Module, Callable]:
    """Pre-hooks that keep the ``position_embeddings`` (cos, sin) each attention module is given."""

    def keep(module, args, kwargs):
        pe = kwargs.get("position_embeddings")
        if isinstance(pe, tuple) and len(pe) == 2:
            store[module] = pe

    return {
        m: keep
        for m in model.modules()
        if "position_embeddings" in inspect.signature(type(m).forward).parameters
        and "atten" in type(m).__name__.lower()
    }


@contextmanager
def attention_calls(model: torch.nn.Module, on_call: Callable[[Call], None]) -> Iterator[None]:
    """For the ``with`` body, every attention call of ``model`` (recorded at the call) goes to
    ``on_call``; the model's attention implementation is restored on exit."""
    _register()
    index = block_index(model)
    pe: dict[torch.nn.Module, Any] = {}

    def record(module, query, key, mask, weights, window=None):
        call = Call(
            layer=index.get(module, -1),
            q=query.detach().to("cpu", torch.float64),
            k=key.detach().to("cpu", torch.float64),
            weights=None if weights is None else weights.detach().to("cpu", torch.float64),
            allowed=None
            if mask is None
            else allowed_keys(
                mask.detach(), (query.shape[0], query.shape[-2], key.shape[-2])
            ).cpu(),
            module=module,
            position_embeddings=pe.get(module),
            sliding_window=window if isinstance(window, int) and window > 0 else None,
        )
        on_call(call)

    hf: Any = model  # a transformers model: its config and set_attn_implementation
    with ATTENTION_SWITCH:
        before = getattr(model.config, "_attn_implementation", None)
        modules = [m for m in model.modules() if m in index]
        try:
            for m in modules:
                _RECORDERS[m] = record
            with forward_hooks(_position_embedding_hooks(model, pe), pre=True, with_kwargs=True):
                try:
                    hf.set_attn_implementation(IMPLEMENTATION)
                except (ValueError, KeyError, NotImplementedError) as exc:
                    raise UnsupportedModelError(
                        f"{type(model).__name__} does not let isoscope record its attention "
                        f"calls ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
                    ) from exc
                try:
                    yield
                finally:
                    if before is not None and hf.config._attn_implementation != before:
                        hf.set_attn_implementation(before)
        finally:
            for m in modules:
                _RECORDERS.pop(m, None)


def layout_of(block: torch.nn.Module) -> tuple[QKLayout, torch.nn.Module] | None:
    """The first :data:`QK_LAYOUTS` entry whose attributes an attention module of ``block`` has,
    with that module."""
    for layout in QK_LAYOUTS:
        names = [n for n in (layout.fused, layout.split, layout.query, layout.key) if n]
        names = [n for n in names if n not in ("thirds", "per_head")]
        for module in block.modules():
            if all(getattr(module, n, None) is not None for n in names):
                return layout, module
    return None


def _heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(B, T, n * d_h) -> (B, n, T, d_h)."""
    return x.reshape(*x.shape[:2], -1, head_dim).transpose(1, 2)


def split_projection(
    layout: QKLayout, attention: torch.nn.Module, out: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """q (B, H, T, d_h), k (B, G, T, d_h) from the output of a fused projection."""
    if layout.split == "thirds":
        q, k, _ = out.chunk(3, dim=-1)
        return _heads(q, head_dim), _heads(k, head_dim)
    if layout.split == "per_head":
        q, k, _ = out.reshape(*out.shape[:2], -1, 3 * head_dim).chunk(3, dim=-1)
        return q.transpose(1, 2), k.transpose(1, 2)
    assert layout.split is not None  # a fused layout names how its output splits
    q, k, _ = getattr(attention, layout.split)(out)
    if layout.heads_axis == 2:  # (B, T, n, d_h)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    return q, k


@contextmanager
def projection_calls(
    model: torch.nn.Module,
    blocks: list[tuple[QKLayout, torch.nn.Module]],
    head_dim: int,
    on_layer: Callable[[int, torch.Tensor, torch.Tensor, torch.nn.Module], None],
    position_embeddings: dict[torch.nn.Module, Any],
) -> Iterator[None]:
    """Forward hooks on the q/k projections of each block (``blocks``: its layout and attention
    module); ``on_layer(layer, q, k, attention)`` gets q (B, H, T, d_h), k (B, G, T, d_h)."""
    seen: dict[int, dict[str, torch.Tensor]] = {}

    def on_output(i: int, part: str, layout: QKLayout, attention: torch.nn.Module):
        def hook(module, args, output):
            if part == "qkv":
                try:
                    q, k = split_projection(layout, attention, output, head_dim)
                except (TypeError, RuntimeError, ValueError) as exc:
                    raise UnsupportedModelError(
                        f"{type(attention).__name__} does not split its fused projection as "
                        f"the layout '{layout.name}' does ({type(exc).__name__}), so its "
                        "queries/keys cannot be read before rotation; choose rotation 'applied'"
                    ) from exc
                on_layer(i, q, k, attention)
                return
            seen.setdefault(i, {})[part] = _heads(output, head_dim)
            if len(seen[i]) == 2:
                parts = seen.pop(i)
                on_layer(i, parts["q"], parts["k"], attention)

        return hook

    hooks: dict[torch.nn.Module, Callable] = {}
    for i, (layout, attention) in enumerate(blocks):
        if layout.fused:
            hooks[getattr(attention, layout.fused)] = on_output(i, "qkv", layout, attention)
        else:
            assert layout.query is not None and layout.key is not None  # an unfused layout
            hooks[getattr(attention, layout.query)] = on_output(i, "q", layout, attention)
            hooks[getattr(attention, layout.key)] = on_output(i, "k", layout, attention)
    with (
        forward_hooks(
            _position_embedding_hooks(model, position_embeddings), pre=True, with_kwargs=True
        ),
        forward_hooks(hooks),
    ):
        yield


def rotate(
    attention: torch.nn.Module,
    q: torch.Tensor,
    k: torch.Tensor,
    position_embeddings: Any,
    inverse: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k (B, n, T, d_h) rotated by the modeling file's own ``apply_rotary_pos_emb`` at the
    ``(cos, sin)`` the attention module was given; ``inverse``: by the opposite angle, divided by
    any scale the (cos, sin) carry (back to before rotation). Checked: turning the result back
    gives the input."""
    apply = getattr(sys.modules[type(attention).__module__], "apply_rotary_pos_emb", None)
    what = type(attention).__name__
    if apply is None or position_embeddings is None:
        raise UnsupportedModelError(
            f"{what} is given no rotary (cos, sin) or its modeling file has no "
            "apply_rotary_pos_emb, so its queries/keys cannot be shown "
            + ("before" if inverse else "after")
            + " rotation; choose the other rotation setting"
        )
    cos, sin = (t.to("cpu", torch.float64) for t in position_embeddings)
    # (cos, sin) may carry a scale s (YaRN's attention factor: s cos, s sin); the inverse of
    # s R(theta) is R(-theta) / s = (cos, -sin) / s^2
    scale2 = cos.square() + sin.square()
    forward, backward = (cos, sin), (cos / scale2, -sin / scale2)
    first, second = (backward, forward) if inverse else (forward, backward)
    rot = int(cos.shape[-1])

    def turn(a, b, cos_sin):
        try:
            return apply(a, b, *cos_sin)
        except RuntimeError:  # partial rotary done by the caller (Phi, StableLM): first rot dims
            a2, b2 = apply(a[..., :rot], b[..., :rot], *cos_sin)
            return torch.cat([a2, a[..., rot:]], -1), torch.cat([b2, b[..., rot:]], -1)

    try:
        q2, k2 = turn(q, k, first)
        back_q, back_k = turn(q2, k2, second)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise UnsupportedModelError(
            f"{what}'s apply_rotary_pos_emb does not take isoscope's (B, heads, T, d_h) "
            f"vectors ({type(exc).__name__}), so its queries/keys cannot be rotated here; "
            "choose the other rotation setting"
        ) from exc
    if not (torch.allclose(back_q, q, atol=1e-6) and torch.allclose(back_k, k, atol=1e-6)):
        raise UnsupportedModelError(
            f"{what}'s apply_rotary_pos_emb is not a rotation isoscope can undo, so its "
            "queries/keys cannot be shown before rotation; choose rotation 'applied'"
        )
    return q2, k2
