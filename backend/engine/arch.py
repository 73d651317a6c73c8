"""Architecture facts of a loaded model, decided in one place and read from the model itself.

Every view that reaches inside a model (queries/keys, TUPE, position table, LayerNorm, ablation,
int8 sites, the variance lab) asks this module instead of probing attribute names itself. What can
be discovered is discovered, with no list of model-type names:

- :func:`is_causal`: the attention modules' own ``is_causal`` flag; where a model has none, the
  definition itself (changing the last token leaves every earlier position's hidden states as
  they were, :func:`causal_by_definition`).
- :func:`wiring`: every norm of the model, found by tracing one forward pass with hooks: which
  norm's output is the input of which projection (``nn.Linear``, GPT-2's ``Conv1D``, routers and
  fused MoE experts: any module owning a >= 2-D weight; routed experts get a subset of its rows).
  The roles follow from that wiring and the order of the calls inside each Transformer block
  (the ``nn.ModuleList`` of ``num_hidden_layers`` blocks); cached per model fingerprint.
  LayerNorm vs RMSNorm (does a constant shift of the input change the output?) and Gemma's
  (1 + weight) (does the norm still output something with its weight zeroed?) come from the module.
- :func:`position_kind`: ``"learned absolute"`` (a table added to the word embeddings),
  ``"rotary"``, ``"alibi"``, ``"relative"`` or ``"none"`` (NoPE: isoscope's ``-nope`` models,
  table zeroed and frozen), from the modules and the config.

Canonical norm roles (the names used in the UI, CLI and JSON; see
:mod:`backend.analysis.layernorm.params`):

- ``emb``: a norm before the first block (BERT's embedding LayerNorm);
- ``pre_attn`` / ``pre_mlp``: a per-layer norm whose output is the input of the attention / MLP
  projections (pre-LN: GPT-2 ``ln_1`` / ``ln_2``, Llama, Gemma's ``pre_feedforward_layernorm``);
- ``attn`` (post-attention) / ``out`` (post-MLP): a per-layer norm that runs after the attention
  / MLP and feeds neither's projections of its own block (post-LN BERT's two norms, whose output
  is the residual stream; Gemma-2/3's and OLMo-2's post-attention / post-feedforward norms);
- ``other``: a further per-layer norm (OLMo-2's q/k norms inside attention);
- ``final``: a norm after the last block; ``head`` for one in a head (the MLM transform LayerNorm).

What cannot be discovered is one :class:`Family` entry in :data:`FAMILIES`: where the query, key
and value projections (or GPT-2's fused one) live, for the views that take them apart (TUPE). The
queries/keys view needs no entry: it reads q and k at the attention call
(:mod:`backend.engine.qk_capture`). A family matches by layout (its paths resolve on the model), not by name. A model no
entry matches still gets every view that needs none (hidden states, norms, int8, massive
activations); :func:`architecture` refuses the rest in one line naming the model and what is missing.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch

from backend.engine.errors import UnsupportedModelError
from backend.engine.hooks import forward_hooks
from backend.engine.layout import (
    ascending_noise,
    feature_window,
    forward_parameters,
    modality_of,
    reads_spectrogram,
)

POSITION_KINDS = ("learned absolute", "rotary", "alibi", "relative", "none")
NORM_ROLES = ("emb", "attn", "out", "pre_attn", "pre_mlp", "other", "final", "head")
TRACE_TOKENS = 8  # length of the traced text
_ROPE_CONFIG_KEYS = (
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "rotary_dim",
    "rotary_pct",
    "rotary_emb_base",
    "partial_rotary_factor",
)


# ----------------------------------------------------------------------------- the family table


@dataclass(frozen=True)
class Family:
    """What cannot be discovered: attribute paths of one layout. ``layers`` and ``word_embeddings``
    are relative to the base model (``model.base_model``); the other paths to one block.
    ``fused_qkv`` is a module whose output is ``q | k | v`` along the last axis (GPT-2 ``c_attn``);
    otherwise ``query``/``key``/``value``."""

    name: str
    layers: str
    word_embeddings: str
    attention: str  # the attention module of a block (its first output: attention output)
    attention_output: str  # the module whose output is the attention output before the residual
    query: str | None = None
    key: str | None = None
    value: str | None = None
    fused_qkv: str | None = None
    token_type_table: str | None = None


_BERT = dict(
    layers="encoder.layer",
    word_embeddings="embeddings.word_embeddings",
    token_type_table="embeddings.token_type_embeddings",
    query="attention.self.query",
    key="attention.self.key",
    value="attention.self.value",
    attention="attention.self",
    attention_output="attention.output.dense",
)
_QKV_PROJ = dict(
    query="self_attn.q_proj",
    key="self_attn.k_proj",
    value="self_attn.v_proj",
    attention="self_attn",
    attention_output="self_attn",
)

FAMILIES: tuple[Family, ...] = (
    Family("BERT-style encoder", **_BERT),
    Family(
        "DistilBERT",
        layers="transformer.layer",
        word_embeddings="embeddings.word_embeddings",
        query="attention.q_lin",
        key="attention.k_lin",
        value="attention.v_lin",
        attention="attention",
        attention_output="attention.out_lin",
    ),
    Family(
        "GPT-2",
        layers="h",
        word_embeddings="wte",
        fused_qkv="attn.c_attn",
        attention="attn",
        attention_output="attn",
    ),
    Family("OPT", layers="decoder.layers", word_embeddings="decoder.embed_tokens", **_QKV_PROJ),
    Family("Llama-style decoder", layers="layers", word_embeddings="embed_tokens", **_QKV_PROJ),
    Family(
        "GPT-NeoX",
        layers="layers",
        word_embeddings="embed_in",
        attention="attention",
        attention_output="attention",
    ),
)


def supported_families() -> str:
    """Human list for error messages: ``BERT-style encoder, DistilBERT, ...``."""
    return ", ".join(f.name for f in FAMILIES)


def _describe(model: torch.nn.Module) -> str:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return f"{type(model).__name__} ({model_type or 'no model_type'})"


def family_of(model: torch.nn.Module) -> Family | None:
    """The :class:`Family` whose paths resolve on ``model`` (its layout), or None."""
    base = _base(model)
    for family in FAMILIES:
        blocks = _get(base, family.layers)
        if not isinstance(blocks, torch.nn.ModuleList) or len(blocks) == 0:
            continue
        paths = [family.attention, family.attention_output, family.query, family.fused_qkv]
        if all(_get(blocks[0], p) is not None for p in paths if p) and _get(
            base, family.word_embeddings
        ):
            return family
    return None


# ----------------------------------------------------------------------------- small helpers


def _get(root: torch.nn.Module, path: str | None) -> Any:
    if path is None:
        return None
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _base(model: torch.nn.Module) -> torch.nn.Module:
    base = getattr(model, "base_model", None)
    return base if isinstance(base, torch.nn.Module) else model


def _module_of(model_or_loaded: Any) -> torch.nn.Module:
    return getattr(model_or_loaded, "model", model_or_loaded)


def _hidden_size(model: torch.nn.Module) -> int:
    return int(getattr(model.config, "hidden_size", 0) or 0)


def _input_device(model: torch.nn.Module) -> torch.device:
    try:
        return model.get_input_embeddings().weight.device
    except Exception:
        return next(model.parameters()).device


def _trace_ids(model: torch.nn.Module, n: int = TRACE_TOKENS, seed: int = 0) -> torch.Tensor:
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    low = min(5, max(vocab - 2, 0))
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, max(vocab, low + 1), (1, n), generator=gen)


def _forward(model: torch.nn.Module, ids: torch.Tensor, **extra: Any) -> Any:
    ids = ids.to(_input_device(model))
    kwargs = {"use_cache": False} if getattr(model.config, "use_cache", None) is not None else {}
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs, **extra)


TRACE_SAMPLES = 16000  # samples of the traced audio clip: 1 s at wav2vec2's 16 kHz


def _trace_forward(model: torch.nn.Module, seed: int = 0) -> Any:
    """One forward pass on a random input of the kind the model reads (its forward's argument
    names say which: token ids, ``pixel_values`` of its configured image size, a clip of
    ``input_values``, or a window of ``input_features`` mel frames)."""
    modality = modality_of(model)
    if modality == "text":
        return _forward(model, _trace_ids(model, seed=seed))
    gen = torch.Generator().manual_seed(seed)
    device = _input_device(model)
    dtype = next(model.parameters()).dtype
    if reads_spectrogram(model):
        bins = int(getattr(model.config, "num_mel_bins", 80) or 80)
        features = torch.randn((1, bins, feature_window(model)), generator=gen)
        return model(input_features=features.to(device, dtype))
    if modality == "audio":
        values = torch.randn((1, TRACE_SAMPLES), generator=gen).to(device, dtype)
        return model(input_values=values)
    config = getattr(model, "config", None)
    size = getattr(config, "image_size", 224)
    height, width = (size, size) if isinstance(size, int) else tuple(size)[:2]
    channels = int(getattr(config, "num_channels", 3) or 3)
    pixels = torch.randn((1, channels, height, width), generator=gen).to(device, dtype)
    extra = {}
    if "noise" in forward_parameters(model):  # ViTMAE: every patch, in order
        extra["noise"] = ascending_noise(model, 1, height, width)
    return model(pixel_values=pixels, **extra)


def blocks_of(model: torch.nn.Module) -> tuple[str, torch.nn.ModuleList] | None:
    """``(path, module list)`` of the Transformer blocks: the ``nn.ModuleList`` of
    ``num_hidden_layers`` modules inside the base model (None when the layers share one module,
    as in ALBERT)."""
    n = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    base = _base(model)
    prefix = _path_in(model, base)
    for name, module in base.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n and n > 0:
            return ".".join(p for p in (prefix, name) if p), module
    return None


def _path_in(model: torch.nn.Module, module: torch.nn.Module) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name
    raise KeyError(f"{type(module).__name__} is not part of this model")


# ----------------------------------------------------------------------------- causal or not


def _flags(model: torch.nn.Module) -> list[bool]:
    found = blocks_of(model)
    root = found[1] if found is not None else model
    return [
        m.is_causal
        for m in root.modules()
        if isinstance(getattr(m, "is_causal", None), bool) and m is not model
    ]


def causal_by_definition(model: torch.nn.Module, n: int = TRACE_TOKENS) -> bool:
    """The definition: changing the last token leaves every earlier position's hidden states
    unchanged (one forward pass of two texts that differ only in their last token)."""
    ids = _trace_ids(model, n)
    other = ids.clone()
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    low = min(5, max(vocab - 2, 0))
    other[0, -1] = low + (int(ids[0, -1]) - low + 1) % max(vocab - low, 1)
    with torch.inference_mode():
        a = _forward(_base(model), ids, output_hidden_states=True).hidden_states
        b = _forward(_base(model), other, output_hidden_states=True).hidden_states
    return all(
        torch.allclose(x[:, :-1].float(), y[:, :-1].float(), rtol=1e-4, atol=1e-5)
        for x, y in zip(a, b, strict=True)
    )


def is_causal(model_or_loaded: Any) -> bool:
    """Whether the model's attention is causal: the attention modules' own ``is_causal`` flag,
    else :func:`causal_by_definition`. Cached per model."""
    model = _module_of(model_or_loaded)
    key = _cache_key(model_or_loaded)
    cached = _CAUSAL.get(key) if key is not None else None
    if cached is not None:
        return cached
    flags = _flags(model)
    result = any(flags) if flags else causal_by_definition(model)
    if key is not None:
        _remember(_CAUSAL, key, result)
    return result


def config_is_causal(config: Any) -> bool:
    """Whether a config (no weights) builds a causal model: the attention modules' flags of the
    model built on the meta device; without flags, what the config itself says (``is_decoder``,
    a ``*ForCausalLM`` architecture)."""
    from transformers import AutoModel

    try:
        with torch.device("meta"):
            model = AutoModel.from_config(config, trust_remote_code=False)
        flags = _flags(model)
    except Exception:
        flags = []
    if flags:
        return any(flags)
    archs = getattr(config, "architectures", None) or []
    return bool(
        getattr(config, "is_decoder", False)
        or any(a.endswith("ForCausalLM") or "LMHead" in a for a in archs)
    )


# ----------------------------------------------------------------------------- norms


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
    :attr:`Norm.feeds`: shared storage, else equal rows), or None."""

    path: str
    layer: int
    width: int
    shared: int
    norm: str | None


def is_norm(module: torch.nn.Module) -> bool:
    """A normalisation module: LayerNorm / RMSNorm / GroupNorm, or a leaf module whose class name
    says norm (LlamaRMSNorm, T5LayerNorm, Gemma2RMSNorm ...)."""
    if isinstance(module, torch.nn.LayerNorm | torch.nn.RMSNorm | torch.nn.GroupNorm):
        return True
    if type(module).__module__.startswith("torch.nn.utils."):
        return False  # weight / spectral norm parametrizations reshape weights, not activations
    return "norm" in type(module).__name__.lower() and not list(module.children())


def _normalises_last_axis(module: torch.nn.Module, out: torch.Tensor) -> bool:
    """False for a norm over channels first, (B, C, T), as wav2vec2's group norm over the conv
    features: its weight is as wide as axis 1, not as the last axis, which holds time."""
    weight = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 1:
        return True
    return out.ndim < 3 or int(weight.shape[0]) == int(out.shape[-1])


def _is_projection(module: torch.nn.Module) -> bool:
    if isinstance(module, torch.nn.Embedding) or is_norm(module):
        return False
    return any(p.ndim >= 2 for p in module.parameters(recurse=False))


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.ndim >= 2:
            return value
    return None


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1, x.shape[-1]).float()


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except Exception:
        return False


def _rows_within(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Every row of ``x`` equals (to bf16 precision) some row of ``y``."""
    if x.shape[-1] != y.shape[-1] or x.numel() == 0:
        return False
    rx, ry = _rows(x).cpu(), _rows(y).cpu()
    if len(rx) > len(ry):
        return False
    scale = ry.abs().amax(dim=1).clamp_min(1e-6)  # (m,)
    diff = (rx[:, None, :] - ry[None, :, :]).abs().amax(dim=2) / scale[None, :]  # (n, m)
    return bool((diff.amin(dim=1) <= 1e-2).all())


def norm_kind(module: torch.nn.Module, width: int) -> tuple[str, float]:
    """``(kind, gamma_offset)`` of a norm from the module itself: ``layernorm`` when shifting the
    input by a constant leaves the output unchanged (mean subtraction), else ``rmsnorm``; the
    gamma offset is what the output is made of with the weight zeroed (Gemma: 1 + weight)."""
    param = next(module.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, width, generator=gen).to(device=device, dtype=dtype)
    weight = getattr(module, "weight", None)
    bias = getattr(module, "bias", None)
    with torch.no_grad():
        saved = [(t, t.detach().clone()) for t in (weight, bias) if isinstance(t, torch.Tensor)]
        try:
            if isinstance(weight, torch.Tensor):
                weight.fill_(1.0)
            if isinstance(bias, torch.Tensor):
                bias.zero_()
            one = module(x).float()
            shifted = module(x + 3.0).float()
            offset = 0.0
            if isinstance(weight, torch.Tensor):
                weight.zero_()
                zero = module(x).float()
                big = (one - zero).abs() > 1e-3
                if bool(big.any()) and float(zero.abs().max()) > 1e-4:
                    offset = round(float((zero[big] / (one - zero)[big]).median()), 3)
        finally:
            for tensor, value in saved:
                tensor.copy_(value)
    kind = "layernorm" if torch.allclose(one, shifted, rtol=1e-2, atol=1e-2) else "rmsnorm"
    return kind, offset


def _attention_side(block: torch.nn.Module, rel: str) -> bool:
    """Whether a projection at ``rel`` (path inside a block) belongs to the attention."""
    child = rel.split(".")[0]
    module = getattr(block, child, None)
    name = type(module).__name__.lower() if module is not None else ""
    return "attn" in child.lower() or "attention" in child.lower() or "attention" in name


_TRACED_BY_KEY: OrderedDict[str, _Traced] = OrderedDict()
_CAUSAL: OrderedDict[str, bool] = OrderedDict()
_TRACED_BY_MODULE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cache_key(model_or_loaded: Any) -> str | None:
    fingerprint = getattr(model_or_loaded, "fingerprint", None)
    return str(fingerprint) if fingerprint else None


def _remember(cache: OrderedDict, key: str, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > 64:
        cache.popitem(last=False)


@dataclass(frozen=True)
class _Traced:
    """What one traced forward pass decides: the norms' wiring (or why there is none) and the
    input of every projection call inside the blocks."""

    wiring: Wiring | None
    no_wiring: str | None
    inputs: tuple[ProjectionInput, ...]


def _traced(model_or_loaded: Any) -> _Traced:
    """One traced forward pass per model (cached per model fingerprint, or per module object for a
    bare model), read by :func:`wiring` and :func:`projection_inputs`."""
    model = _module_of(model_or_loaded)
    key = _cache_key(model_or_loaded)
    if key is not None and key in _TRACED_BY_KEY:
        return _TRACED_BY_KEY[key]
    try:
        if model in _TRACED_BY_MODULE:
            return _TRACED_BY_MODULE[model]
    except TypeError:
        pass
    result = _trace(model)
    if key is not None:
        _remember(_TRACED_BY_KEY, key, result)
    try:
        _TRACED_BY_MODULE[model] = result
    except TypeError:
        pass
    return result


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


def _trace(model: torch.nn.Module) -> _Traced:
    kind = _describe(model)
    found = blocks_of(model)
    if found is None:
        raise UnsupportedModelError(
            f"{kind} has no list of {getattr(model.config, 'num_hidden_layers', '?')} Transformer "
            "blocks (its layers share one module), so its norms cannot be told apart per layer"
        )
    blocks_path, blocks = found
    names = {m: n for n, m in model.named_modules()}
    norms = [m for m in model.modules() if is_norm(m)]
    projections = [m for m in model.modules() if _is_projection(m)]
    block_index = {b: i for i, b in enumerate(blocks)}
    # ("norm"|"proj"|"block", module, block, tensor); the tensors are the very objects the
    # modules saw (inference mode: nothing to detach), so identity tells a shared input
    events: list[tuple] = []
    current: list[int] = []

    def on_norm(module, args, output):
        x = output[0] if isinstance(output, tuple) else output
        if isinstance(x, torch.Tensor):
            events.append(("norm", module, current[-1] if current else None, x))

    def on_proj(module, args, kwargs):
        x = _first_tensor(args, kwargs)
        if x is not None:
            events.append(("proj", module, current[-1] if current else None, x))

    def on_block_start(module, args, kwargs):
        current.append(block_index[module])

    def on_block_end(module, args, kwargs, output):
        x = output[0] if isinstance(output, tuple) else output
        events.append(("block", module, current.pop() if current else None, x))

    hooks: dict = {}
    for m in norms:
        hooks.setdefault(m, []).append(on_norm)
    pre_hooks: dict = {m: on_proj for m in projections}
    for b in blocks:
        pre_hooks[b] = on_block_start
    with (
        forward_hooks(hooks),
        forward_hooks(pre_hooks, pre=True, with_kwargs=True),
        forward_hooks({b: on_block_end for b in blocks}, with_kwargs=True),
        torch.inference_mode(),
    ):
        try:
            _trace_forward(model)
        except (TypeError, ValueError, RuntimeError) as exc:  # not a model we can feed
            raise UnsupportedModelError(
                f"{kind}: one forward pass on a random input failed ({type(exc).__name__}), so "
                "its norms' wiring cannot be traced"
            ) from exc
    fed_by = _feeding_norms(events)
    inputs = _inputs_from_events(events, names, fed_by)
    if not norms:
        return _Traced(None, f"{kind} has no normalisation modules to trace", inputs)
    try:
        wired = _wiring_from_events(model, events, names, blocks_path, blocks, fed_by)
    except UnsupportedModelError as exc:
        return _Traced(None, str(exc), inputs)
    return _Traced(wired, None, inputs)


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
        match = next((tn for tn, e in earlier if _same_storage(x, e[3])), None)
        if match is None:
            match = next(
                (
                    tn
                    for tn, e in earlier
                    if e[3].shape[-1] == x.shape[-1] and _rows_within(x, e[3])
                ),
                None,
            )
        if match is not None:
            fed_by[tp] = match
    return fed_by


def _inputs_from_events(events, names, fed_by: dict[int, int]) -> tuple[ProjectionInput, ...]:
    inputs: list[ProjectionInput] = []
    first_of: dict[tuple[int, int], int] = {}  # (layer, id(input)) -> index in inputs
    for t, (kind, module, layer, x) in enumerate(events):
        if kind != "proj" or layer is None:
            continue
        shared = first_of.setdefault((layer, id(x)), len(inputs))
        norm = names[events[fed_by[t]][1]] if t in fed_by else None
        inputs.append(ProjectionInput(names[module], int(layer), int(x.shape[-1]), shared, norm))
    return tuple(inputs)


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
    base_prefix = _path_in(model, _base(model))
    post_ln = any(
        _same_storage(out, e[3])
        for _, (_, out) in block_ends.items()
        if isinstance(out, torch.Tensor)
        for _, e in norm_calls
        if e[2] is not None
    )
    seen: dict[torch.nn.Module, Norm] = {}
    per_layer_roles: dict[int, list[str]] = {}
    ordered: list[Norm] = []
    for t, (_, module, layer, out) in norm_calls:
        if module in seen or not _normalises_last_axis(module, out):
            continue
        path = names[module]
        fed = tuple(dict.fromkeys(feeds[t]))
        in_block = tuple(p for p in fed if p.startswith(prefix))
        if layer is not None:
            role = _layer_role(
                blocks[layer], prefix + str(layer) + ".", t, in_block, proj_calls, names, post_ln
            )
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
            kind_cache[module] = norm_kind(module, int(out.shape[-1]))
        norm_kind_, offset = kind_cache[module]
        norm = Norm(path, role, layer, norm_kind_, offset, int(out.shape[-1]), fed, in_block)
        seen[module] = norm
        ordered.append(norm)
    if not ordered:
        raise UnsupportedModelError(
            f"{_describe(model)} runs no LayerNorm/RMSNorm in its forward pass"
        )
    return Wiring(tuple(ordered), blocks_path, len(blocks), post_ln)


def _layer_role(block, block_prefix, t, in_block, proj_calls, names, post_ln) -> str:
    mine = [
        (tp, _attention_side(block, names[e[1]][len(block_prefix) :]))
        for tp, e in proj_calls
        if names[e[1]].startswith(block_prefix)
    ]
    attn_t = [tp for tp, a in mine if a]
    mlp_t = [tp for tp, a in mine if not a]
    own = [p for p in in_block if p.startswith(block_prefix)]
    if not post_ln and own:
        sides = {_attention_side(block, p[len(block_prefix) :]) for p in own}
        return "pre_attn" if True in sides else "pre_mlp"
    if attn_t and attn_t[0] < t < attn_t[-1] or mlp_t and mlp_t[0] < t < mlp_t[-1]:
        return "other"
    if mlp_t and t > mlp_t[-1]:
        return "out"
    if attn_t and t > attn_t[-1]:
        return "attn"
    return "other"


# ----------------------------------------------------------------------------- positions


def position_table_of(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The absolute position table: an ``nn.Embedding`` of the base model other than the word
    embeddings with ``max_position_embeddings`` (Whisper: ``max_source_positions``) rows (OPT
    keeps 2 more). Also the zeroed table of a NoPE model, and Whisper's fixed sinusoidal one
    (:func:`is_sinusoidal_table`)."""
    model = _module_of(model_or_loaded)
    config = model.config
    # Whisper's encoder names its table's size max_source_positions (frames)
    n = int(
        getattr(config, "max_position_embeddings", 0)
        or getattr(config, "max_source_positions", 0)
        or 0
    )
    if n <= 0:
        return None
    try:
        words = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    except NotImplementedError:  # CANINE: hashed character embeddings, no single table
        words = None
    for module in _base(model).modules():
        if (
            type(module) is not torch.nn.Embedding
            and not isinstance(module, torch.nn.Embedding)
            or module is words
        ):
            continue
        if not n <= module.num_embeddings <= n + 2:
            continue
        # a sinusoidal module is a table added to the input (Marian, Pegasus) unless it feeds
        # rotary attention (RoFormer); its values must be the sinusoids
        if "sinusoidal" not in type(module).__name__.lower() or (
            not _uses_rotary(model) and is_sinusoidal_table(module.weight)
        ):
            return module
    return None


def position_offset(model_or_loaded: Any) -> int:
    """First table row used as a position: the table's own ``offset`` (OPT: 2), else
    ``padding_idx + 1`` for tables that reserve the padding row (RoBERTa), else 0."""
    table = position_table_of(model_or_loaded)
    if table is None:
        return 0
    offset = getattr(table, "offset", None)
    if isinstance(offset, int):
        return offset
    return int(table.padding_idx) + 1 if table.padding_idx is not None else 0


def _uses_rotary(model: torch.nn.Module) -> bool:
    config = model.config
    rotary_module = any(
        "rotary" in type(m).__name__.lower() or "inv_freq" in dict(m.named_buffers(recurse=False))
        for m in model.modules()
    )
    return bool(
        rotary_module
        or hasattr(config, "rotary_value")
        or any(getattr(config, k, None) is not None for k in _ROPE_CONFIG_KEYS)
    )


def position_kind(model_or_loaded: Any) -> str:
    """One of :data:`POSITION_KINDS`, from the model's modules and its config."""
    model = _module_of(model_or_loaded)
    config = model.config
    if getattr(config, "isoscope_nope", False):
        return "none"
    attn_config = getattr(config, "attn_config", None)
    if getattr(config, "alibi", False) is True or getattr(attn_config, "alibi", False) is True:
        return "alibi"
    if any(
        "alibi" in name.lower() for name in dir(type(_base(model))) if not name.startswith("__")
    ):
        return "alibi"
    if _uses_rotary(model):
        return "rotary"
    if getattr(config, "position_embedding_type", None) not in (None, "absolute") or any(
        getattr(config, k, None) for k in ("relative_attention", "relative_attention_num_buckets")
    ):
        return "relative"
    if position_table_of(model) is not None:
        return "learned absolute"
    return "none"


# ----------------------------------------------------------------------------- resolved modules


@dataclass(frozen=True)
class Layer:
    """The modules of one Transformer block (``index`` 0-based). ``norms`` are (role, module) in
    forward order; ``fused_qkv`` is set instead of ``query``/``key``/``value`` for GPT-2."""

    index: int
    module: torch.nn.Module
    attention: torch.nn.Module
    attention_output: torch.nn.Module
    norms: tuple[tuple[str, torch.nn.Module], ...]
    query: torch.nn.Module | None = None
    key: torch.nn.Module | None = None
    value: torch.nn.Module | None = None
    fused_qkv: torch.nn.Module | None = None


@dataclass(frozen=True)
class Architecture:
    """Where everything lives in one loaded model (see :class:`Family` and :func:`wiring`).

    ``position_table`` is the learned table module when the model has one (also for NoPE, whose
    table is zeroed); use :attr:`absolute_position_table` for "the table the model really adds".
    ``head_norms`` are (path, module) of the head norms that are present.
    """

    family: Family
    model: torch.nn.Module = field(repr=False)
    base: torch.nn.Module = field(repr=False)
    layers: tuple[Layer, ...] = field(repr=False)
    word_embeddings: torch.nn.Module = field(repr=False)
    position_table: torch.nn.Embedding | None = field(repr=False)
    token_type_table: torch.nn.Embedding | None = field(repr=False)
    embedding_norm: torch.nn.Module | None = field(repr=False)
    final_norm: torch.nn.Module | None = field(repr=False)
    head_norms: tuple[tuple[str, torch.nn.Module], ...] = field(repr=False)
    position_kind: str
    position_offset: int
    gamma_offset: float
    pre_ln: bool
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def absolute_position_table(self) -> torch.nn.Embedding | None:
        """The learned position table the model adds to its word embeddings; None for rotary,
        ALiBi, relative and NoPE models."""
        return self.position_table if self.position_kind == "learned absolute" else None

    def path(self, module: torch.nn.Module) -> str:
        """Dotted path of ``module`` inside the full model (``""`` for the model itself)."""
        return _path_in(self.model, module)

    def scaling(self, layer: Layer) -> float:
        """The logit scale of a layer's attention (the module's own ``scaling``, else 1/sqrt(d_h))."""
        return float(getattr(layer.attention, "scaling", self.head_dim**-0.5))


def architecture(model_or_loaded: Any) -> Architecture:
    """Resolve the q/k/v layout (:class:`Family`) and the discovered facts of a model (a
    ``torch.nn.Module`` or a ``LoadedModel``).

    Raises :class:`UnsupportedModelError` when no :class:`Family` entry matches its layout (the
    views that take queries and keys apart need one) or the norms cannot be traced.
    """
    model = _module_of(model_or_loaded)
    config = getattr(model, "config", None)
    family = family_of(model)
    if family is None:
        raise UnsupportedModelError(
            f"{_describe(model)} has no entry in isoscope's family table, which says where the "
            f"query/key/value projections live (known layouts: {supported_families()}); the "
            "hidden-state, norm and decoder views work without one"
        )
    base = _base(model)
    blocks = _get(base, family.layers)
    wired = wiring(model_or_loaded)
    named = dict(model.named_modules())
    by_layer: dict[int, list[tuple[str, torch.nn.Module]]] = {}
    for norm in wired.norms:
        if norm.layer is not None:
            by_layer.setdefault(norm.layer, []).append((norm.role, named[norm.path]))
    layers = []
    for i, block in enumerate(blocks):
        parts = {
            name: _get(block, getattr(family, name))
            for name in ("query", "key", "value", "fused_qkv", "attention", "attention_output")
        }
        missing = [getattr(family, n) for n, m in parts.items() if m is None and getattr(family, n)]
        if missing:
            raise UnsupportedModelError(
                f"{_describe(model)}: layer {i + 1} has no {', '.join(missing)}; this "
                f"{family.name} variant is laid out differently from the one isoscope knows"
            )
        layers.append(Layer(index=i, module=block, norms=tuple(by_layer.get(i, ())), **parts))
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 0) or 0)
    head_dim = int(getattr(config, "head_dim", 0) or (hidden // heads if heads else 0))
    kv_heads = int(getattr(config, "num_key_value_heads", 0) or heads)
    role_modules = [(n.role, n.path, named[n.path]) for n in wired.norms]
    first = lambda role: next((m for r, _, m in role_modules if r == role), None)  # noqa: E731
    offsets = {n.gamma_offset for n in wired.norms}
    return Architecture(
        family=family,
        model=model,
        base=base,
        layers=tuple(layers),
        word_embeddings=_get(base, family.word_embeddings),
        position_table=position_table_of(model),
        token_type_table=_get(base, family.token_type_table),
        embedding_norm=first("emb"),
        final_norm=first("final"),
        head_norms=tuple((p, m) for r, p, m in role_modules if r == "head"),
        position_kind=position_kind(model),
        position_offset=position_offset(model),
        gamma_offset=max(offsets) if offsets else 0.0,
        pre_ln=not wired.post_ln,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
    )


def position_table(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The learned position-table module of a model, or None (rotary, ALiBi, relative, none).

    Also returns the zeroed table of a NoPE model; :func:`backend.engine.models.position_table` is the
    "what the model really adds" accessor."""
    return position_table_of(model_or_loaded)


def absolute_position_table(model_or_loaded: Any) -> torch.nn.Embedding | None:
    """The position table the model really adds to its word embeddings, or None (rotary, ALiBi,
    relative, NoPE)."""
    return (
        position_table_of(model_or_loaded)
        if position_kind(model_or_loaded) == ("learned absolute")
        else None
    )


def position_embedding_label(model: torch.nn.Module) -> str:
    """The model card's "position embeddings" line, for any model."""
    kind = position_kind(model)
    config = model.config
    if kind == "none":
        if getattr(config, "isoscope_nope", False):
            return "none (NoPE: table zeroed and frozen)"
        return "none"
    if kind == "rotary":
        return "rotary (RoPE)"
    if kind == "alibi":
        return "ALiBi (linear attention biases)"
    if kind == "relative":
        return (
            f"relative ({getattr(config, 'position_embedding_type', None) or 'relative attention'})"
        )
    table = position_table_of(model)
    if is_sinusoidal_table(table.weight):
        return f"absolute, fixed sinusoidal table ({table.num_embeddings} positions)"
    return f"absolute, learned ({table.num_embeddings} positions)"


def is_sinusoidal_table(weight: torch.Tensor) -> bool:
    """Whether a (P, d) table holds Vaswani et al.'s sinusoids as [sin | cos] halves (Whisper's
    encoder): read from the values, since a fixed table is a parameter like a learned one. Row 0
    is sin(0) = 0 then cos(0) = 1, and every row has sin^2 + cos^2 = 1 per frequency, so the norm
    sqrt(d / 2)."""
    rows = weight.detach().float().cpu()
    if rows.dim() != 2 or rows.shape[1] % 2 or rows.shape[0] < 2:
        return False
    half = rows.shape[1] // 2
    first = rows[0]
    norms = rows.norm(dim=1) / half**0.5
    return bool(
        first[:half].abs().max() < 1e-3
        and (first[half:] - 1).abs().max() < 1e-3
        and (norms - 1).abs().max() < 1e-2
    )
