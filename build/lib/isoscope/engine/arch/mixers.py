"""The token mixers of every layer (attention, state-space, recurrent, linear attention,
convolution) and the layer pattern they make, read from the loaded model.

:func:`layer_pattern` returns one :class:`LayerPattern`: per block (``layer`` 1..L, as everywhere
in isoscope) the :class:`Mixer` modules that move information between positions, in call order,
and how many AltUp copies of the residual stream the blocks carry. :func:`pattern_sentence`
renders it ("4 layers: 2 Gated DeltaNet, 2 full attention"); the model card, the Overview and
``analyze`` show that sentence, the queries/keys and sink views read
:meth:`LayerPattern.attention_layers` and :meth:`LayerPattern.other_layers`.

How each kind is decided, with no model-type name:

- **softmax attention** (:data:`SOFTMAX_KINDS`): a module that calls transformers' attention
  function in one traced forward pass (:func:`isoscope.engine.arch.qk_capture.attention_calls`); for a
  modeling file with its own attention code, a module that forms a softmax over the product of
  its own queries and keys (:func:`isoscope.engine.arch.scores.score_calls`), else (no such
  product seen) a module whose class says attention and which owns none of the recurrences
  below. ``sliding-window attention`` when the module keeps a
  ``sliding_window``, its attention call is given one, or its recorded mask hides an earlier
  key; ``latent attention (MLA)`` when a norm inside the attention module feeds one of its
  projections (DeepSeek-V2's low-rank ``kv_a`` -> norm -> ``kv_b``: keys and values come out of
  a compressed latent).
- **state-space and recurrent mixers**, from the parameters of their recurrence: a decay ``A_log``
  with a state per channel (2-D) is ``Mamba`` (S6); one decay per head with a skip ``D`` is
  ``Mamba-2`` (SSD); one decay per head with a per-head step bias and no ``D`` is ``Gated
  DeltaNet``; a decay gated per channel (Kimi Delta Attention) is ``linear attention``;
  ``time_decay`` + ``time_first`` is ``RWKV`` time mixing; ``recurrent_param`` is the ``RG-LRU``.
  The mixer reported is the highest module around those parameters that holds no norm of the
  model width and no other mixer (RecurrentGemma's recurrent block around its ``rg_lru``).
- **short convolution**: a module owning a 1-D convolution wider than one position that is none
  of the above (LFM2); a kernel of one is a per-token projection (SqueezeBERT).
- **linear attention**: an attention-side module (its name says attention) that makes no softmax
  attention call (MiniMax's lightning attention).

A layer with two mixers is ``parallel`` when both read the same input up to a constant factor
(Falcon-H1), otherwise sequential; a mixer whose weights several layers hold (one module or
tied copies) is ``shared`` (Zamba2's one attention block). A layer with no mixer is ``MLP only`` (Nemotron-H's ``-``).
AltUp streams (Gemma 3n): the blocks' input has a leading axis of that many copies.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.arch.lookup import blocks_of, describe, module_of
from isoscope.engine.arch.memo import MIXERS
from isoscope.engine.arch.norms import first_tensor, is_norm, is_projection, same_storage
from isoscope.engine.arch.probe import trace_forward
from isoscope.engine.errors import UnsupportedModelError

FULL, SLIDING, LATENT = "full attention", "sliding-window attention", "latent attention (MLA)"
SOFTMAX_KINDS = (FULL, SLIDING, LATENT)
MAMBA, MAMBA2, DELTANET = "Mamba", "Mamba-2", "Gated DeltaNet"
LINEAR, CONV, RG_LRU, RWKV = "linear attention", "short convolution", "RG-LRU", "RWKV"
MIXER_KINDS = (*SOFTMAX_KINDS, MAMBA, MAMBA2, DELTANET, LINEAR, CONV, RG_LRU, RWKV)
STATE_SPACE_KINDS = (MAMBA, MAMBA2)
MLP_ONLY = "MLP only"
PARALLEL_COSINE = 1 - 1e-5  # two inputs this aligned are one input times a constant


@dataclass(frozen=True)
class Mixer:
    """One token mixer: ``kind`` (one of :data:`MIXER_KINDS`), its module ``path``, its
    ``window`` (sliding-window attention) and whether the same module serves several layers."""

    kind: str
    path: str
    window: int | None = None
    shared: bool = False

    @property
    def softmax(self) -> bool:
        return self.kind in SOFTMAX_KINDS

    @property
    def label(self) -> str:
        if not self.shared:
            return self.kind
        return "shared attention block" if self.kind == FULL else f"shared {self.kind} block"


@dataclass(frozen=True)
class LayerKinds:
    """The mixers of one block (``layer`` 1..L), in call order; ``parallel`` when they read the
    same input."""

    layer: int
    mixers: tuple[Mixer, ...]
    parallel: bool = False

    @property
    def label(self) -> str:
        if not self.mixers:
            return MLP_ONLY
        joined = " + ".join(m.label for m in self.mixers)
        return f"{joined} in parallel" if self.parallel else joined

    @property
    def softmax(self) -> bool:
        return any(m.softmax for m in self.mixers)


@dataclass(frozen=True)
class LayerPattern:
    """Every block's mixers and the number of AltUp copies of the residual stream (1: none)."""

    layers: tuple[LayerKinds, ...]
    streams: int = 1

    def attention_layers(self) -> tuple[int, ...]:
        """The layers (1..L) that run softmax attention."""
        return tuple(k.layer for k in self.layers if k.softmax)

    def other_layers(self) -> dict[int, str]:
        """The layers without softmax attention, with their kind ("Mamba-2", "MLP only")."""
        return {k.layer: k.label for k in self.layers if not k.softmax}

    def kinds(self) -> tuple[str, ...]:
        """Every mixer kind of the model, in order of first appearance."""
        return tuple(dict.fromkeys(m.kind for k in self.layers for m in k.mixers))

    def no_attention_reason(self) -> str | None:
        """One line for a view that needs softmax attention, None when some layer has it."""
        if self.attention_layers():
            return None
        kinds = self.kinds()
        if not kinds:  # no mixer recognised: token mixing of another kind (Fourier, recurrent)
            return "no attention layers: no layer forms softmax attention over its tokens"
        return f"no attention layers: {' and '.join(f'{k} mixers' for k in kinds)} only"


def pattern_sentence(pattern: LayerPattern) -> str:
    """``"4 layers: 2 Gated DeltaNet, 2 full attention"``, ``"4 layers: full attention"``,
    ``"... ; AltUp x 4 streams"``: the layer labels counted in order of first appearance."""
    counts = Counter(k.label for k in pattern.layers)
    n = len(pattern.layers)
    if len(counts) == 1:
        body = next(iter(counts))
    else:
        body = ", ".join(f"{c} {label}" for label, c in counts.items())
    sentence = f"{n} layer{'s' if n != 1 else ''}: {body}"
    if pattern.streams > 1:
        sentence += f"; AltUp x {pattern.streams} streams"
    return sentence


def layer_pattern(model_or_loaded: Any) -> LayerPattern:
    """The mixers of every block, from the parameters and one traced forward pass (cached per
    model fingerprint, or per module object). Raises :class:`UnsupportedModelError` when the model
    has no list of per-layer blocks or cannot be run on a random input."""
    model = module_of(model_or_loaded)
    return MIXERS.get_or_compute(model_or_loaded, lambda: _pattern(model))


# ----------------------------------------------------------------------------- the recurrences


def _recurrence_kind(module: torch.nn.Module) -> str | None:
    """The mixer kind whose recurrence parameters ``module`` owns (directly), if any."""
    own = dict(module.named_parameters(recurse=False))
    if "time_decay" in own and "time_first" in own:
        return RWKV
    if "recurrent_param" in own:
        return RG_LRU
    decay = own.get("A_log")
    if decay is None:
        return None
    if sum(s > 1 for s in decay.shape) >= 2:  # a state per channel: (d_inner, d_state)
        return MAMBA
    if "D" in own:
        return MAMBA2
    step = own.get("dt_bias")
    if step is not None and step.numel() == decay.numel():
        return DELTANET
    return LINEAR  # a decay gated per channel (Kimi Delta Attention)


def _model_width(model: torch.nn.Module) -> int:
    return int(getattr(model.config, "hidden_size", 0) or getattr(model.config, "d_model", 0) or 0)


def _holds_wide_norm(module: torch.nn.Module, width: int) -> bool:
    for child in module.children():
        weight = getattr(child, "weight", None)
        if is_norm(child) and isinstance(weight, torch.Tensor) and weight.shape[-1] == width:
            return True
    return False


def _mixer_root(owner, block, parents, owners, width) -> torch.nn.Module:
    """The highest module around ``owner`` inside ``block`` that holds no norm of the model width
    and no other mixer."""
    root = owner
    while True:
        parent = parents.get(root)
        if parent is None or parent is block or _holds_wide_norm(parent, width):
            return root
        if any(o is not owner and _inside(o, parent) for o in owners):
            return root
        root = parent


def _inside(module: torch.nn.Module, container: torch.nn.Module) -> bool:
    return any(m is module for m in container.modules())


# ----------------------------------------------------------------------------- the traced pass


@dataclass
class _Pass:
    called_attention: dict  # module -> the window its call was given, or its mask showed (bool)
    inputs: dict  # module -> its first tensor input
    norm_outputs: list  # (norm module, output)
    block_input: torch.Tensor | None


def _traced_pass(model: torch.nn.Module, blocks) -> _Pass:
    from isoscope.engine.arch.qk_capture import attention_calls, uses_attention_interface
    from isoscope.engine.arch.scores import score_calls

    called: dict = {}
    inputs: dict = {}
    norm_outputs: list = []
    first_block: list = []

    def on_call(call) -> None:
        windowed = False
        if call.allowed is not None:
            allowed = call.allowed[0, 0]  # (T, T)
            causal = torch.ones_like(allowed).tril()
            windowed = bool((causal & ~allowed).any())
        called[call.module] = call.sliding_window or windowed or called.get(call.module, False)

    def on_scores(call) -> None:
        allowed = call.weights[0, 0] > 0  # (T, T): the keys the module's own mask left
        causal = torch.ones_like(allowed).tril()
        windowed = bool((causal & ~allowed).any())
        if call.module is not None:
            called[call.module] = windowed or called.get(call.module, False)

    def on_input(module, args, kwargs):
        x = first_tensor(args, kwargs)
        if x is not None and module not in inputs:
            inputs[module] = x

    def on_norm(module, args, output):
        x = output[0] if isinstance(output, tuple) else output
        if isinstance(x, torch.Tensor):
            norm_outputs.append((module, x))

    def on_block(module, args, kwargs):
        x = first_tensor(args, kwargs)
        if x is not None and not first_block:
            first_block.append(x)

    inside = [m for b in blocks for m in b.modules() if m is not b]
    pre = {m: on_input for m in inside}
    pre[blocks[0]] = on_block
    norms = {m: on_norm for m in inside if is_norm(m)}
    with (
        forward_hooks(pre, pre=True, with_kwargs=True),
        forward_hooks(norms),
        torch.inference_mode(),
    ):
        try:
            recorded = False
            if uses_attention_interface(model):
                try:
                    with attention_calls(model, on_call):
                        recorded = True
                        trace_forward(model)
                except UnsupportedModelError:
                    if recorded:  # the pass itself failed, not the switch to recording
                        raise
            if not recorded:  # the scores the modules form in their own code
                with score_calls(model, on_scores):
                    trace_forward(model)
        except (TypeError, ValueError, RuntimeError, IndexError, KeyError, AttributeError) as exc:
            raise UnsupportedModelError(
                f"{describe(model)}: one forward pass on a random input failed "
                f"({type(exc).__name__}), so its layer kinds cannot be read"
            ) from exc
    return _Pass(called, inputs, norm_outputs, first_block[0] if first_block else None)


def _latent(attention: torch.nn.Module, traced: _Pass) -> bool:
    """A norm inside ``attention`` whose output is the input of one of its projections."""
    mine = {m for m in attention.modules()}
    outputs = [x for norm, x in traced.norm_outputs if norm in mine]
    for m in attention.modules():
        x = traced.inputs.get(m)
        if is_projection(m) and x is not None and any(same_storage(x, y) for y in outputs):
            return True
    return False


def _window(module: torch.nn.Module, seen: bool | int) -> int | None:
    """The module's window: its own ``sliding_window``, else the one its attention call was
    given, else -1 when only its mask showed one (None: full attention)."""
    window = getattr(module, "sliding_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    if not isinstance(seen, bool) and seen > 0:
        return int(seen)
    return -1 if seen else None


def _same_input(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None or a.shape != b.shape:
        return False
    if same_storage(a, b):
        return True
    x, y = a.detach().double().flatten(), b.detach().double().flatten()
    denom = float(x.norm() * y.norm())
    return denom > 0 and abs(float(x @ y)) / denom > PARALLEL_COSINE


# ----------------------------------------------------------------------------- the pattern


def _pattern(model: torch.nn.Module) -> LayerPattern:
    found = blocks_of(model)
    if found is None:
        raise UnsupportedModelError(
            f"{describe(model)} has no list of per-layer blocks, so its layer kinds cannot be read"
        )
    _, blocks = found
    width = _model_width(model)
    traced = _traced_pass(model, blocks)
    own_code = not traced.called_attention
    uses: Counter = Counter()  # weight storage -> blocks that hold it (a shared block: > 1)
    for block in blocks:
        uses.update({_storage(p) for p in block.parameters()} - {None})
    names = {m: n for n, m in model.named_modules()}
    layers = []
    for i, block in enumerate(blocks):
        parents = {c: p for p in block.modules() for c in p.children()}
        owners = {m: k for m in block.modules() if (k := _recurrence_kind(m)) is not None}
        mixers: dict[torch.nn.Module, tuple[str, int | None]] = {}
        for owner, kind in owners.items():
            mixers[_mixer_root(owner, block, parents, list(owners), width)] = (kind, None)
        covered = {m for root in mixers for m in root.modules()}
        for m in block.modules():
            if m in covered:
                continue
            if m in traced.called_attention:
                kind = LATENT if _latent(m, traced) else FULL
                window = _window(m, traced.called_attention[m]) if kind == FULL else None
                mixers[m] = (SLIDING if window else kind, window if window and window > 0 else None)
            elif own_code and m is not block and "atten" in type(m).__name__.lower():
                if not any(_inside(a, m) for a in mixers) and not _inside_any(m, mixers):
                    mixers[m] = (FULL, None)
        covered = {m for root in mixers for m in root.modules()}
        for m in block.modules():
            if m in covered or m is block:
                continue
            if any(_token_convolution(c) for c in m.children()):
                mixers[m] = (CONV, None)
                covered |= set(m.modules())
        if not any(k in SOFTMAX_KINDS or k == LINEAR for k, _ in mixers.values()):
            for name, child in block.named_children():
                side = "atten" in name.lower() or "atten" in type(child).__name__.lower()
                if side and child not in covered and not is_norm(child):
                    mixers[child] = (LINEAR, None)
        order = list(traced.inputs)
        ranked = sorted(mixers, key=lambda m: order.index(m) if m in order else len(order))
        kinds = tuple(
            Mixer(mixers[m][0], names.get(m, ""), mixers[m][1], _shared(m, uses)) for m in ranked
        )
        parallel = len(ranked) == 2 and _same_input(
            traced.inputs.get(ranked[0]), traced.inputs.get(ranked[1])
        )
        layers.append(LayerKinds(i + 1, kinds, parallel))
    x = traced.block_input
    streams = int(x.shape[0]) if x is not None and x.ndim == 4 else 1
    return LayerPattern(tuple(layers), streams)


def _token_convolution(module: torch.nn.Module) -> bool:
    """A 1-D convolution that mixes neighbouring positions (kernel wider than one); a kernel of
    one is a per-token projection (SqueezeBERT's q/k/v and feed-forward)."""
    return isinstance(module, torch.nn.Conv1d) and int(module.kernel_size[0]) > 1


def _shared(module: torch.nn.Module, uses: Counter) -> bool:
    """Whether the mixer's weights are held by several blocks (one module, or tied copies)."""
    weights = [_storage(p) for p in module.parameters() if p.ndim >= 2]
    return bool(weights) and all(w is not None and uses[w] > 1 for w in weights)


def _storage(p: torch.Tensor) -> int | None:
    """Where a weight's data lives; None for an offloaded (meta) weight, which has no storage."""
    return None if p.device.type == "meta" else p.untyped_storage().data_ptr()


def _inside_any(module: torch.nn.Module, mixers) -> bool:
    return any(_inside(module, root) for root in mixers)
