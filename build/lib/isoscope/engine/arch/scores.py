"""Softmax attention found from what a module computes: the scores it forms from its own queries
and keys, recorded during a forward pass.

Modeling files with their own attention code (GPT-J, GPT-Neo, CodeGen, XGLM, BLOOM, Falcon, MPT,
XLM, XLNet, DeBERTa, ...) never call transformers' attention function, and each holds q and k its
own way (separate or fused projections, parameters used in an ``einsum``, per-layer head sizes).
What they share is the computation itself: a product of two token-by-feature tensors gives a
(..., T, T) score tensor, masks, scales and position biases are added to it, and a softmax over
its last axis turns it into attention weights. :func:`score_calls` watches every torch function
the forward pass calls (a :class:`~torch.overrides.TorchFunctionMode`) and records exactly that:

- a **token product** is a ``matmul`` / ``@`` / ``bmm`` / ``baddbmm`` / two-operand ``einsum``
  whose output ends in (T, T), T the length of the input, with one operand's row axis and the
  other's column axis (the queries (..., T, d) and the keys (..., T, d), as the attention
  multiplies them: after their norms, biases and rotary embedding);
- the tensors computed from it that keep its last two axes (scaling, masks, ALiBi and relative
  position biases, dtype casts, views) carry it along;
- a **softmax** over the last axis of such a tensor closes the call: its output is the attention
  weights, the product's operands are q and k. Where several token products reach one softmax
  (XLNet's content and position terms), the first one formed is the content term q . k;
- ``scaled_dot_product_attention`` is a call of its own: q and k are its arguments and the
  weights are recomputed from them with its mask, causal flag and scale.

The module a call belongs to is the innermost running module holding parameters (the attention
module whose method forms the scores; a parameter-free ``nn.Softmax`` or dropout is skipped).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from isoscope.engine.arch.hooks import forward_hooks

F = torch.nn.functional

_PRODUCTS = {
    torch.matmul,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
    torch.bmm,
    torch.Tensor.bmm,
    torch.baddbmm,
    torch.Tensor.baddbmm,
    torch.einsum,
}
_SOFTMAX = {torch.softmax, torch.Tensor.softmax, F.softmax, torch.special.softmax}
# normalisations over the last axis that a module may use in place of a softmax (exp(x - lse))
_NORMALISERS = _SOFTMAX | {torch.logsumexp, torch.Tensor.logsumexp}


@dataclass
class ScoreCall:
    """One softmax attention formed in a module's own code: ``q`` (B, H, T, d), ``k`` (B, H, T, d)
    (keys repeated to the query heads where the module repeats them), ``weights`` (B, H, T, T),
    as the module computed them, and the ``module`` (the innermost running module with
    parameters)."""

    q: torch.Tensor
    k: torch.Tensor
    weights: torch.Tensor
    module: torch.nn.Module | None


@dataclass
class _Product:
    q: torch.Tensor  # (*batch, T, d)
    k: torch.Tensor  # (*batch, T, d)
    order: int
    owner: torch.nn.Module | None


def _flat_tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat_tensors(v)]
    return []


def _operands(func, args, kwargs) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The two operands of a matrix product, as (..., Tq, d) and (..., d, Tk)."""
    if func in (torch.baddbmm, torch.Tensor.baddbmm):
        a = kwargs.get("batch1", args[1] if len(args) > 1 else None)
        b = kwargs.get("batch2", args[2] if len(args) > 2 else None)
    else:
        a = args[0] if args else kwargs.get("input")
        b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if a.ndim < 2 or b.ndim < 2:
        return None
    return a, b


def _einsum_operands(args) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A two-operand einsum whose output ends in (i, j), i a row axis of one operand only and j of
    the other only, with contracted axes: its operands permuted to (*out_batch, i, d) and
    (*out_batch, j, d) (axes of the output an operand lacks are added with size 1)."""
    if len(args) != 3 or not isinstance(args[0], str):
        return None
    equation, a, b = args
    if "->" not in equation or "." in equation:
        return None
    lhs, out = equation.replace(" ", "").split("->")
    parts = lhs.split(",")
    if len(parts) != 2 or len(out) < 2:
        return None
    la, lb = parts
    i, j = out[-2], out[-1]
    if not (i in la and i not in lb and j in lb and j not in la):
        return None
    contracted = [c for c in la if c in lb and c not in out]
    if not contracted or len(set(la)) != len(la) or len(set(lb)) != len(lb):
        return None
    batch = out[:-2]

    def arrange(x: torch.Tensor, letters: str, row: str) -> torch.Tensor:
        extra = [c for c in letters if c not in batch and c != row and c not in contracted]
        if extra:  # an axis summed over but not shared: not a plain product of rows
            raise ValueError
        have = "".join(c for c in batch if c in letters)
        y = torch.einsum(f"{letters}->{have}{row}{''.join(contracted)}", x)
        y = y.reshape(*y.shape[: len(have) + 1], -1)
        shape = [x.shape[letters.index(c)] if c in letters else 1 for c in batch]
        return y.reshape(*shape, *y.shape[-2:])

    try:
        return arrange(a, la, i), arrange(b, lb, j)
    except (ValueError, RuntimeError):
        return None


class _ScoreMode(TorchFunctionMode):
    """Sees every torch function of the pass; records token products and closes them at a
    softmax (module doc)."""

    def __init__(self, tokens: Callable[[], int | None], owner, on_call, on_other=None):
        super().__init__()
        self.tokens = tokens
        self.owner = owner
        self.on_call = on_call
        self.on_other = on_other
        self.carried: dict[int, tuple[torch.Tensor, list[_Product]]] = {}
        self.count = 0

    def clear(self) -> None:
        self.carried.clear()

    def drop(self, products=None, owner=None) -> None:
        """Forget the tensors carrying any of ``products``, or formed inside ``owner`` (so a
        pass over many layers holds one layer's scores at a time)."""
        ids = {id(p) for p in products or ()}
        self.carried = {
            key: (x, ps)
            for key, (x, ps) in self.carried.items()
            if not any(id(p) in ids or (owner is not None and p.owner is owner) for p in ps)
        }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._see(func, args, kwargs, out)
        except (RuntimeError, ValueError, IndexError):  # a shape this reading does not follow
            pass
        return out

    def _see(self, func, args, kwargs, out) -> None:
        if func is F.scaled_dot_product_attention:
            self._sdpa(args, kwargs)
            return
        if not isinstance(out, torch.Tensor) or out.ndim < 2:
            return
        t = self.tokens()
        if func in _NORMALISERS and self.on_other is not None:
            self._other(func, args, kwargs, out, t)
        if func in _PRODUCTS:
            if t and out.shape[-2:] == (t, t):
                pair = (
                    _einsum_operands(args)
                    if func is torch.einsum
                    else _operands(func, args, kwargs)
                )
                if pair is not None:
                    q, k = pair if func is torch.einsum else (pair[0], pair[1].transpose(-1, -2))
                    if q.shape[-2] == t and k.shape[-2] == t and q.shape[-1] == k.shape[-1]:
                        self.count += 1
                        self.carried[id(out)] = (out, [_Product(q, k, self.count, self.owner())])
            return
        sources = [
            self.carried[id(x)] for x in _flat_tensors((args, kwargs)) if id(x) in self.carried
        ]
        sources = [(x, p) for x, p in sources if x is not out or func not in _SOFTMAX]
        if not sources:
            return
        if func in _SOFTMAX:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if isinstance(dim, int) and dim in (-1, out.ndim - 1):
                products = sorted(
                    {id(p): p for _, ps in sources for p in ps}.values(), key=lambda p: p.order
                )
                self._record(products[0], out)
                self.drop(products)
            return
        if out.shape[-2:] == sources[0][0].shape[-2:]:
            products = [p for _, ps in sources for p in ps]
            self.carried[id(out)] = (out, products)

    def _other(self, func, args, kwargs, out, t) -> None:
        """A softmax (or log-sum-exp) over the last axis of scores that are not (T, T) token
        products (windows, blocks or chunks of the text): handed to ``on_other`` with the
        shape of the scores it normalises."""
        x = args[0] if args else kwargs.get("input")
        dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
        if isinstance(dim, list | tuple) and len(dim) == 1:
            dim = dim[0]
        if not isinstance(x, torch.Tensor) or id(x) in self.carried or x.ndim < 2:
            return
        if isinstance(dim, int) and dim in (-1, x.ndim - 1) and x.shape[-2:] != (t, t):
            self.on_other(self.owner(), tuple(x.shape))

    def _record(self, product: _Product, weights: torch.Tensor) -> None:
        t = int(weights.shape[-1])
        q, k = product.q, product.k
        batch = q.shape[:-2]
        k = k.expand(*torch.broadcast_shapes(batch, k.shape[:-2]), *k.shape[-2:])
        q = q.expand(*k.shape[:-2], *q.shape[-2:])
        n = math.prod(q.shape[:-2])
        b = self._batch(n)
        if b is None or weights.numel() != n * t * t:
            return
        q = q.reshape(b, n // b, t, q.shape[-1])
        k = k.reshape(b, n // b, t, k.shape[-1])
        self.on_call(ScoreCall(q, k, weights.reshape(b, n // b, t, t), self.owner()))

    def _batch(self, n: int) -> int | None:
        b = getattr(self, "batch_size", None)
        return b if b and n % b == 0 else None

    def _sdpa(self, args, kwargs) -> None:
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
        given = dict(zip(names, args, strict=False)) | kwargs
        q, k = given["query"], given["key"]
        t = self.tokens()
        if t is None or q.ndim != 4 or q.shape[-2] != t or k.shape[-2] != t:
            return
        if k.shape[1] != q.shape[1]:  # grouped keys (enable_gqa): one per query head
            k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        scale = given.get("scale") or q.shape[-1] ** -0.5
        scores = (q.double() @ k.double().transpose(-1, -2)) * scale
        mask = given.get("attn_mask")
        if given.get("is_causal"):
            causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~causal, -math.inf)
        if isinstance(mask, torch.Tensor):
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, -math.inf)
            else:
                scores = scores + mask.double()
        self.on_call(ScoreCall(q, k, scores.softmax(-1), self.owner()))


@contextmanager
def score_calls(
    model: torch.nn.Module,
    on_call: Callable[[ScoreCall], None],
    on_other: Callable[[torch.nn.Module | None, tuple[int, ...]], None] | None = None,
) -> Iterator[None]:
    """For the ``with`` body, every softmax attention that ``model``'s forward passes form in
    their own code goes to ``on_call`` (module doc). Works with any attention implementation
    that materialises the scores or calls ``scaled_dot_product_attention``. ``on_other(module,
    shape)``: each softmax or log-sum-exp over the last axis of scores that are not a (T, T)
    token product (attention over windows, blocks or hashed chunks of the text)."""
    stack: list[torch.nn.Module] = []
    holds = {m: any(True for _ in m.parameters()) for m in model.modules()}
    mode = _ScoreMode(lambda: getattr(mode, "tokens_now", None), lambda: owner(), on_call, on_other)

    def owner() -> torch.nn.Module | None:
        return next((m for m in reversed(stack) if holds.get(m)), None)

    def enter(module, args, kwargs):
        stack.append(module)

    def leave(module, args, kwargs, output):
        if stack and stack[-1] is module:
            stack.pop()
        elif module in stack:
            del stack[len(stack) - 1 - stack[::-1].index(module)]
        if module is model:
            mode.clear()
        elif holds.get(module):
            mode.drop(owner=module)

    def start(module, args, kwargs):
        ids = next(
            (x for x in _flat_tensors((args, kwargs)) if not x.is_floating_point() and x.ndim == 2),
            None,
        )
        embeds = kwargs.get("inputs_embeds")
        shape = ids.shape if ids is not None else embeds.shape[:2] if embeds is not None else None
        mode.tokens_now = int(shape[1]) if shape is not None else None
        mode.batch_size = int(shape[0]) if shape is not None else None
        mode.clear()

    modules = list(model.modules())
    with (
        forward_hooks({model: start}, pre=True, with_kwargs=True),
        forward_hooks({m: enter for m in modules}, pre=True, with_kwargs=True),
        forward_hooks({m: leave for m in modules}, with_kwargs=True),
    ):
        try:
            with mode:
                yield
        finally:
            mode.clear()
