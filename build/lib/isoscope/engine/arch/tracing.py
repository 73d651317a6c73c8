"""One traced forward pass per model, with hooks on every norm, projection and block: which
norm's output is the input of which projection (:func:`wiring`), and the input of every
projection call inside the blocks (:func:`projection_inputs`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from isoscope.engine.arch.hooks import forward_hooks
from isoscope.engine.arch.lookup import base_of, blocks_of, describe, module_of, path_in
from isoscope.engine.arch.memo import TRACED
from isoscope.engine.arch.norms import (
    Norm,
    ProjectionInput,
    Wiring,
    attention_side,
    first_tensor,
    gate_argument,
    is_norm,
    is_projection,
    norm_kind,
    normalises_last_axis,
    rows_within,
    same_storage,
)
from isoscope.engine.arch.probe import trace_forward
from isoscope.engine.errors import UnsupportedModelError


@dataclass(frozen=True)
class _Traced:
    """What one traced forward pass decides: the norms' wiring (or why there is none) and the
    input of every projection call inside the blocks."""

    wiring: Wiring | None
    no_wiring: str | None
    inputs: tuple[ProjectionInput, ...]
    outside: tuple[str, ...] = ()  # projections called outside the layers, in call order


def _traced(model_or_loaded: Any) -> _Traced:
    """One traced forward pass per model (cached per model fingerprint, or per module object for a
    bare model), read by :func:`wiring` and :func:`projection_inputs`."""
    model = module_of(model_or_loaded)
    return TRACED.get_or_compute(model_or_loaded, lambda: _trace(model))


def wiring(model_or_loaded: Any) -> Wiring:
    """Every norm of the model and where its output goes, from one traced forward pass (cached
    per model fingerprint, or per module object for a bare model).

    Raises :class:`UnsupportedModelError` when the model has no list of per-layer blocks (ALBERT
    shares one layer module across all layers) or no norm of the model width.
    """
    traced = _traced(model_or_loaded)
    if traced.wiring is None:
        raise UnsupportedModelError(traced.no_wiring)
    return traced.wiring


def projection_inputs(model_or_loaded: Any) -> tuple[ProjectionInput, ...]:
    """The input of every projection call inside the Transformer blocks, in call order, from the
    same traced forward pass as :func:`wiring` (so "which norm feeds which projection" is decided
    once): which calls share one input tensor, and which norm's output it is. Works on models
    without norms too (every ``norm`` is then None); raises :class:`UnsupportedModelError` when
    the model has no list of per-layer blocks or does not run on token ids."""
    return _traced(model_or_loaded).inputs


def projections_outside(model_or_loaded: Any) -> tuple[str, ...]:
    """The paths of the projections the traced forward pass calls outside the layers (an input
    or output projection of the model, Gemma 3n's AltUp projections), in call order."""
    return _traced(model_or_loaded).outside


def _trace(model: torch.nn.Module) -> _Traced:
    kind = describe(model)
    found = blocks_of(model)
    if found is None:
        raise UnsupportedModelError(
            f"{kind} has no list of {getattr(model.config, 'num_hidden_layers', '?')} Transformer "
            "blocks (its layers share one module), so its norms cannot be told apart per layer"
        )
    blocks_path, blocks = found
    names = {m: n for n, m in model.named_modules()}
    norms = [m for m in model.modules() if is_norm(m)]
    projections = [m for m in model.modules() if is_projection(m)]
    block_index = {b: i for i, b in enumerate(blocks)}
    # parts of a layer kept in parallel lists (XLM's attentions[i], ffns[i], layer_norm1[i]):
    # their calls belong to layer i, as the blocks' own do
    part_index = {m: i for lst in sibling_lists(model, blocks) for i, m in enumerate(lst)}
    returned: dict[torch.nn.Module, bool] = {}
    # ("norm"|"proj"|"block", module, block, tensor); the tensors are the very objects the
    # modules saw (inference mode: nothing to detach), so identity tells a shared input
    events: list[tuple] = []
    current: list[int] = []

    def on_norm(module, args, output):
        x = output[0] if isinstance(output, tuple) else output
        if isinstance(x, torch.Tensor):
            events.append(("norm", module, current[-1] if current else None, x))

    def on_proj(module, args, kwargs):
        x = first_tensor(args, kwargs)
        if x is not None:
            events.append(("proj", module, current[-1] if current else None, x))

    def on_proj_output(module, args, output):
        returned[module] = returned.get(module, True) and isinstance(output, torch.Tensor)

    def on_block_start(module, args, kwargs):
        current.append(block_index[module] if module in block_index else part_index[module])

    def on_part_end(module, args, kwargs, output):
        if current:
            current.pop()

    def on_block_end(module, args, kwargs, output):
        x = output[0] if isinstance(output, tuple) else output
        events.append(("block", module, current.pop() if current else None, x))

    hooks: dict = {}
    for m in norms:
        hooks.setdefault(m, []).append(on_norm)
    for m in projections:
        hooks.setdefault(m, []).append(on_proj_output)
    pre_hooks: dict = {m: on_proj for m in projections}
    for b in [*blocks, *part_index]:  # a part may itself be a projection: both hooks then
        pre_hooks[b] = [pre_hooks[b], on_block_start] if b in pre_hooks else on_block_start
    ends = {b: on_block_end for b in blocks} | {m: on_part_end for m in part_index}
    with (
        forward_hooks(hooks),
        forward_hooks(pre_hooks, pre=True, with_kwargs=True),
        forward_hooks(ends, with_kwargs=True),
        torch.inference_mode(),
    ):
        try:
            trace_forward(model)
        except (TypeError, ValueError, RuntimeError) as exc:  # not a model we can feed
            raise UnsupportedModelError(
                f"{kind}: one forward pass on a random input failed ({type(exc).__name__}), so "
                "its norms' wiring cannot be traced"
            ) from exc
    fed_by = _feeding_norms(events)
    inputs = _inputs_from_events(events, names, fed_by, returned)
    outside = tuple(dict.fromkeys(names[e[1]] for e in events if e[0] == "proj" and e[2] is None))
    if not norms:
        return _Traced(None, f"{kind} has no normalisation modules to trace", inputs, outside)
    try:
        wired = _wiring_from_events(model, events, names, blocks_path, blocks, fed_by)
    except UnsupportedModelError as exc:
        return _Traced(None, str(exc), inputs, outside)
    return _Traced(wired, None, inputs, outside)


def _feeding_norms(events: list[tuple]) -> dict[int, int]:
    """For each projection call (its event index), the norm call (event index) whose output is
    its input: the latest earlier one sharing its storage, else the latest whose rows hold every
    input row (a routed expert's subset of tokens). The one rule of "which norm feeds which
    projection"."""
    norm_calls = [(t, e) for t, e in enumerate(events) if e[0] == "norm"]
    fed_by: dict[int, int] = {}
    for tp, (kind, _, _, x) in enumerate(events):
        if kind != "proj":
            continue
        earlier = [(tn, e) for tn, e in reversed(norm_calls) if tn < tp]
        match = next((tn for tn, e in earlier if same_storage(x, e[3])), None)
        if match is None:
            match = next(
                (tn for tn, e in earlier if e[3].shape[-1] == x.shape[-1] and rows_within(x, e[3])),
                None,
            )
        if match is not None:
            fed_by[tp] = match
    return fed_by


def _inputs_from_events(
    events, names, fed_by: dict[int, int], returned: dict
) -> tuple[ProjectionInput, ...]:
    inputs: list[ProjectionInput] = []
    first_of: dict[tuple[int, int], int] = {}  # (layer, id(input)) -> index in inputs
    for t, (kind, module, layer, x) in enumerate(events):
        if kind != "proj" or layer is None:
            continue
        shared = first_of.setdefault((layer, id(x)), len(inputs))
        norm = names[events[fed_by[t]][1]] if t in fed_by else None
        width = int(x.shape[-1])
        inputs.append(
            ProjectionInput(
                names[module],
                int(layer),
                width,
                shared,
                norm,
                rows=x.numel() // max(width, 1),
                plain=returned.get(module, True),
            )
        )
    return tuple(inputs)


def sibling_lists(model: torch.nn.Module, blocks: torch.nn.ModuleList) -> list[torch.nn.ModuleList]:
    """The other lists of as many modules beside the block list, in the same parent: a layer
    kept as parallel lists (XLM, Flaubert: ``attentions[i]``, ``layer_norm1[i]``, ``ffns[i]``,
    ``layer_norm2[i]``), whose i-th members are parts of layer i."""
    parent = next((m for m in model.modules() if any(c is blocks for c in m.children())), None)
    if parent is None:
        return []
    return [
        c
        for c in parent.children()
        if c is not blocks and isinstance(c, torch.nn.ModuleList) and len(c) == len(blocks)
    ]


def _wiring_from_events(model, events, names, blocks_path, blocks, fed_by) -> Wiring:
    kind_cache: dict = {}
    norm_calls = [(t, e) for t, e in enumerate(events) if e[0] == "norm"]
    proj_calls = [(t, e) for t, e in enumerate(events) if e[0] == "proj"]
    block_ends = {e[2]: (t, e[3]) for t, e in enumerate(events) if e[0] == "block"}
    first_block = min((t for t, e in enumerate(events) if e[2] is not None), default=0)
    feeds: dict[int, list[str]] = {t: [] for t, _ in norm_calls}
    for tp, tn in fed_by.items():  # which norm call feeds each projection call
        feeds[tn].append(names[events[tp][1]])
    prefix = blocks_path + "."
    base_prefix = path_in(model, base_of(model))
    post_ln = any(
        same_storage(out, e[3])
        for _, (_, out) in block_ends.items()
        if isinstance(out, torch.Tensor)
        for _, e in norm_calls
        if e[2] is not None
    )
    mixers = _mixer_paths(model)
    seen: dict[torch.nn.Module, Norm] = {}
    per_layer_roles: dict[int, list[str]] = {}
    ordered: list[Norm] = []
    for t, (_, module, layer, out) in norm_calls:
        if module in seen or not normalises_last_axis(module, out):
            continue
        path = names[module]
        fed = tuple(dict.fromkeys(feeds[t]))
        in_block = tuple(p for p in fed if p.startswith(prefix))
        if layer is not None:
            block_prefix = prefix + str(layer) + "."
            side = _mixer_side(blocks[layer], block_prefix, mixers.get(layer + 1, ()))
            role = _layer_role(block_prefix, t, in_block, proj_calls, names, post_ln, side)
            if role in per_layer_roles.setdefault(layer, []) and role != "other":
                role = "other"
            per_layer_roles[layer].append(role)
        elif t < first_block:
            role = "emb"
        elif base_prefix and not path.startswith(base_prefix + "."):
            role = "head"
        else:
            role = "final"
        if module not in kind_cache:
            kind_cache[module] = norm_kind(module, int(out.shape[-1]), tuple(out.shape))
        norm_kind_, offset = kind_cache[module]
        width = int(out.shape[-1])
        gated = gate_argument(module) is not None
        norm = Norm(path, role, layer, norm_kind_, offset, width, fed, in_block, gated)
        seen[module] = norm
        ordered.append(norm)
    if not ordered:
        raise UnsupportedModelError(
            f"{describe(model)} runs no LayerNorm/RMSNorm in its forward pass"
        )
    return Wiring(tuple(ordered), blocks_path, len(blocks), post_ln)


def _mixer_paths(model: torch.nn.Module) -> dict[int, tuple[str, ...]]:
    """Per layer (1..L), the paths of its token mixers (:func:`layer_pattern`); empty where the
    layer kinds cannot be read."""
    from isoscope.engine.arch.mixers import layer_pattern

    try:
        pattern = layer_pattern(model)
    except UnsupportedModelError:
        return {}
    return {k.layer: tuple(m.path for m in k.mixers) for k in pattern.layers}


def _mixer_side(block, block_prefix: str, mixers: tuple[str, ...]):
    """Whether a projection (its path) belongs to the block's token mixer: attention by name
    (:func:`attention_side`), or inside one of the layer's mixers (Mamba's ``mixer``, LFM2's
    ``conv``), so the norm before a state-space mixer is its ``pre_attn`` as attention's is."""

    def side(path: str) -> bool:
        if any(path == m or path.startswith(m + ".") for m in mixers):
            return True
        return attention_side(block, path[len(block_prefix) :])

    return side


def _layer_role(block_prefix, t, in_block, proj_calls, names, post_ln, side) -> str:
    mine = [(tp, side(names[e[1]])) for tp, e in proj_calls if names[e[1]].startswith(block_prefix)]
    attn_t = [tp for tp, a in mine if a]
    mlp_t = [tp for tp, a in mine if not a]
    own = [p for p in in_block if p.startswith(block_prefix)]
    if not post_ln and own:
        sides = {side(p) for p in own}
        return "pre_attn" if True in sides else "pre_mlp"
    if attn_t and attn_t[0] < t < attn_t[-1] or mlp_t and mlp_t[0] < t < mlp_t[-1]:
        return "other"
    if mlp_t and t > mlp_t[-1]:
        return "out"
    if attn_t and t > attn_t[-1]:
        return "attn"
    return "other"


# ----------------------------------------------------------------------------- positions
