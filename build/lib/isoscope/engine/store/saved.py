"""Saved analyses: a whole :class:`ExtractionResult` written as a versioned zip (or folder).

``isoscope analyze ... --save RUN.isoscope`` writes one; the dashboard reopens it
("Open a saved analysis" in the sidebar) on a machine that need not have the model.

Layout, identical in a zip and in a folder (no pickle anywhere; arrays load with
``allow_pickle=False``):

- ``manifest.json``: ``format`` (:data:`FORMAT_NAME`), ``format_version``, the isoscope version
  and time that wrote it, the model card, model fingerprint, corpus name and hash, extraction
  settings, notices, the remaining scalar fields of the result, and the SHA-256 of each file below.
- ``texts.json``: the corpus texts, a JSON list of strings (the corpus hash is re-checked on load).
- ``arrays.npz``: every array of the result (float64 (S, d) statistics, int64 argmin/argmax counts,
  float32 (S, k, d) sample vectors, int64 sample index) and the token table as ``tok_<field>``.

:func:`load_saved` refuses a file from a newer format version (:class:`NewerSavedFormatError`)
and a damaged or foreign file (:class:`CorruptSavedAnalysisError`), each with one actionable
sentence. Fields are (de)serialised from the dataclass definitions, so a field added to
:class:`ExtractionResult` with a default keeps older files readable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from isoscope import __version__
from isoscope.engine.errors import InputError, IsoscopeError
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings, TokenTable
from isoscope.engine.jsonio import strict_json, to_jsonable
from isoscope.engine.load.models import LoadedModel, ModelInfo

FORMAT_NAME = "isoscope-saved-analysis"
FORMAT_VERSION = 1
SUFFIX = ".isoscope"
MANIFEST = "manifest.json"
TEXTS = "texts.json"
ARRAYS = "arrays.npz"
# What a saved analysis opened from a path may hold in all, decompressed: the bound of a file
# this machine's own runs wrote. An upload's bound is the upload limit that carried it
# (``max_bytes``), so a small zip cannot expand into more memory than the upload itself could take.
MAX_SAVED_BYTES = 16 * 2**30


class SavedAnalysisError(IsoscopeError):
    """A saved analysis that cannot be opened (missing, damaged, or from a newer isoscope)."""


class CorruptSavedAnalysisError(SavedAnalysisError):
    """Not an isoscope saved analysis, or one whose files are damaged or inconsistent."""


class NewerSavedFormatError(SavedAnalysisError):
    """Written by a newer isoscope, in a format version this one cannot read."""


# ----------------------------------------------------------------------------- writing


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _payload(result: ExtractionResult) -> dict[str, bytes]:
    """The three files of a saved analysis as bytes."""
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        if f.name in ("texts", "tokens", "settings"):
            continue
        if isinstance(value, np.ndarray):
            arrays[f.name] = value
        else:
            scalars[f.name] = to_jsonable(value)
    for f in dataclasses.fields(result.tokens):
        column = np.asarray(getattr(result.tokens, f.name))
        if column.dtype == object:
            column = column.astype(str)
        arrays[f"tok_{f.name}"] = column
    buffer = io.BytesIO()
    np.savez(buffer, **cast(dict[str, Any], arrays))  # else mypy matches them to allow_pickle
    array_bytes = buffer.getvalue()
    text_bytes = strict_json(list(result.texts), ensure_ascii=False).encode("utf-8")
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "written_by": f"isoscope {__version__}",
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": result.settings.to_dict(),
        "result": scalars,
        "num_texts": result.num_texts,
        "num_tokens": result.num_tokens,
        "files": {TEXTS: _sha256(text_bytes), ARRAYS: _sha256(array_bytes)},
    }
    manifest_bytes = strict_json(manifest, indent=1).encode("utf-8")
    return {MANIFEST: manifest_bytes, TEXTS: text_bytes, ARRAYS: array_bytes}


def check_save_target(path: str | Path) -> Path:
    """Refuse a save path whose folder does not exist (checked before a long extraction)."""
    path = Path(path)
    if not path.parent.exists():
        raise InputError(f"--save: folder {str(path.parent)!r} does not exist; create it first")
    return path


def save_analysis(result: ExtractionResult, path: str | Path, folder: bool | None = None) -> Path:
    """Write ``result`` to ``path``: a zip, or a folder when ``folder`` is true or ``path`` is an
    existing folder. Atomic for a zip (temporary file, then rename). Returns the path written."""
    path = Path(path)
    as_folder = path.is_dir() if folder is None else folder
    check_save_target(path)
    files = _payload(result)
    if as_folder:
        if path.exists() and not path.is_dir():
            raise InputError(
                f"--save: {str(path)!r} is a file; give a folder name or a .isoscope file"
            )
        if path.is_dir() and any(path.iterdir()) and not (path / MANIFEST).exists():
            raise InputError(
                f"--save: folder {str(path)!r} is not empty and holds no saved analysis; "
                "give a new or empty folder"
            )
        path.mkdir(exist_ok=True)
        for name, data in files.items():  # manifest last: a crash leaves no valid-looking folder
            if name != MANIFEST:
                _atomic_write(path / name, data)
        _atomic_write(path / MANIFEST, files[MANIFEST])
        return path
    if path.is_dir():
        raise InputError(
            f"--save: {str(path)!r} is a folder; give a file name such as run.isoscope"
        )
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w") as zf:
            zf.writestr(MANIFEST, files[MANIFEST], compress_type=zipfile.ZIP_DEFLATED)
            zf.writestr(TEXTS, files[TEXTS], compress_type=zipfile.ZIP_DEFLATED)
            zf.writestr(ARRAYS, files[ARRAYS], compress_type=zipfile.ZIP_STORED)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- reading


def load_saved(path: str | Path, max_bytes: int = MAX_SAVED_BYTES) -> ExtractionResult:
    """Open a saved analysis (zip or folder) written by :func:`save_analysis`; its files hold at
    most ``max_bytes`` in all, counted as they are read."""
    from isoscope.engine.inputs.files import read_capped, regular_file_stat

    path = Path(path).expanduser()
    name = path.name
    if not path.exists():
        raise SavedAnalysisError(
            f"saved analysis {str(path)!r} does not exist; give the path of a .isoscope file or folder"
        )
    what = "a .isoscope file or folder"
    if path.is_dir():
        files = {}
        left = max_bytes
        for member in (MANIFEST, TEXTS, ARRAYS):
            if not (path / member).exists():
                raise CorruptSavedAnalysisError(
                    f"{name}: the folder has no {member}; it is not a complete isoscope saved "
                    "analysis (save it again with analyze --save)"
                )
            files[member] = read_capped(path / member, what, cap=left)
            left -= len(files[member])
        return _from_files(files, name)
    regular_file_stat(path, what)  # a FIFO or a device is refused before it is opened
    try:
        with path.open("rb") as fh:
            return _from_zip(fh, name, max_bytes)
    except OSError as exc:
        from isoscope.engine.inputs.files import unreadable

        raise unreadable(path, exc, what) from None


def read_saved_bytes(
    raw: bytes, name: str = "saved analysis", max_bytes: int = MAX_SAVED_BYTES
) -> ExtractionResult:
    """Open a saved analysis from the bytes of its zip (a dashboard upload); ``max_bytes``: the
    most its members may hold in all, decompressed (the upload limit that carried it)."""
    return _from_zip(io.BytesIO(raw), name, max_bytes)


def _from_zip(fh: Any, name: str, max_bytes: int) -> ExtractionResult:
    """The result in the zip ``fh``; its members decompressed to at most ``max_bytes`` in all,
    counted while they stream (a member's declared size is not trusted)."""
    try:
        with zipfile.ZipFile(fh) as zf:
            members = {info.filename: info for info in zf.infolist()}
            files = {}
            left = max_bytes
            for member in (MANIFEST, TEXTS, ARRAYS):
                info = members.get(member)
                if info is None:
                    raise CorruptSavedAnalysisError(
                        f"{name}: no {member} inside; this is not an isoscope saved analysis "
                        "(write one with `isoscope analyze ... --save RUN.isoscope`)"
                    )
                files[member] = _read_member(zf, info, left, name, max_bytes)
                left -= len(files[member])
    except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise CorruptSavedAnalysisError(
            f"{name} is not a readable zip ({exc}); it is damaged or not an isoscope saved "
            "analysis: copy it again or save it again with analyze --save"
        ) from None
    return _from_files(files, name)


def _read_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, left: int, name: str, max_bytes: int
) -> bytes:
    """The bytes of one member, read in chunks and refused as soon as they pass ``left``."""
    too_large = CorruptSavedAnalysisError(
        f"{name}: its files hold more than {max_bytes / 2**20:,.1f} MiB decompressed, the limit "
        "for a saved analysis here (the upload limit); open a smaller analysis, or open it from "
        "the command line"
    )
    if info.file_size > left:
        raise too_large
    chunks: list[bytes] = []
    with zf.open(info) as stream:
        while True:
            chunk = stream.read(min(1 << 20, left + 1))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
            if left < 0:
                raise too_large
    return b"".join(chunks)


def _corrupt(name: str, what: str) -> CorruptSavedAnalysisError:
    return CorruptSavedAnalysisError(
        f"{name} is damaged ({what}); copy the file again or save it again with analyze --save"
    )


def _from_files(files: dict[str, bytes], name: str) -> ExtractionResult:
    try:
        manifest = json.loads(files[MANIFEST].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _corrupt(name, "manifest.json is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise CorruptSavedAnalysisError(
            f"{name} is not an isoscope saved analysis (its manifest names no {FORMAT_NAME!r} "
            "format); write one with `isoscope analyze ... --save RUN.isoscope`"
        )
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise _corrupt(name, f"format version {version!r} is not a positive integer")
    if version > FORMAT_VERSION:
        raise NewerSavedFormatError(
            f"{name} was written by {manifest.get('written_by', 'a newer isoscope')} in saved-analysis "
            f"format {version}; this isoscope ({__version__}) reads up to format {FORMAT_VERSION}: "
            "update isoscope on this machine"
        )
    expected = manifest.get("files") or {}
    for member in (TEXTS, ARRAYS):
        if expected.get(member) != _sha256(files[member]):
            raise _corrupt(name, f"{member} does not match its checksum")
    try:
        texts = json.loads(files[TEXTS].decode("utf-8"))
        with np.load(io.BytesIO(files[ARRAYS]), allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (
        UnicodeDecodeError,
        json.JSONDecodeError,
        ValueError,
        OSError,
        zipfile.BadZipFile,
    ) as exc:
        raise _corrupt(name, f"unreadable contents: {exc}") from None
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise _corrupt(name, "texts.json is not a list of strings")
    return _assemble(manifest, tuple(texts), arrays, name)


def _assemble(
    manifest: dict, texts: tuple[str, ...], arrays: dict[str, np.ndarray], name: str
) -> ExtractionResult:
    try:
        token_fields = [f.name for f in dataclasses.fields(TokenTable)]
        missing = [f"tok_{f}" for f in token_fields if f"tok_{f}" not in arrays]
        if missing:
            raise _corrupt(name, f"missing token columns {', '.join(missing)}")
        tokens = TokenTable(*(arrays[f"tok_{f}"] for f in token_fields))
        setting_names = {f.name for f in dataclasses.fields(ExtractionSettings)}
        settings = ExtractionSettings(
            **{k: v for k, v in (manifest.get("settings") or {}).items() if k in setting_names}
        )
        scalars = manifest.get("result") or {}
        kwargs: dict[str, Any] = {"texts": texts, "tokens": tokens, "settings": settings}
        for f in dataclasses.fields(ExtractionResult):
            if f.name in kwargs:
                continue
            if f.name in arrays:
                kwargs[f.name] = arrays[f.name]
            elif f.name in scalars:
                value = scalars[f.name]
                if isinstance(value, list) and str(f.type).startswith("tuple"):
                    value = tuple(value)
                kwargs[f.name] = value
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _corrupt(name, f"no {f.name!r} field")
        result = ExtractionResult(**kwargs)
    except IsoscopeError as exc:
        if isinstance(exc, SavedAnalysisError):
            raise
        raise _corrupt(name, str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise _corrupt(name, str(exc)) from None
    _check_consistent(result, name)
    return result


def _check_consistent(result: ExtractionResult, name: str) -> None:
    """Shapes agree with each other and the corpus hash with the texts: else the file is damaged."""
    from isoscope.engine.inputs.corpus import Corpus

    shape = np.shape(result.mean)
    if len(shape) != 2 or shape[0] < 1:
        raise _corrupt(name, f"statistics have shape {shape}")
    for field_name in ("variance", "min", "max", "mean_abs", "argmin_count", "argmax_count"):
        if np.shape(getattr(result, field_name)) != shape:
            raise _corrupt(name, f"{field_name} has shape {np.shape(getattr(result, field_name))}")
    vectors, index = result.sample_vectors, result.sample_index
    if vectors.ndim != 3 or vectors.shape[0] != shape[0] or vectors.shape[2] != shape[1]:
        raise _corrupt(name, f"sample vectors have shape {vectors.shape}")
    if index.shape != (vectors.shape[1],):
        raise _corrupt(name, "sample index and sample vectors disagree")
    n = len(result.tokens)
    if any(len(getattr(result.tokens, f.name)) != n for f in dataclasses.fields(TokenTable)):
        raise _corrupt(name, "token columns have different lengths")
    if len(index) and (index.min() < 0 or index.max() >= n):
        raise _corrupt(name, "sample index points outside the token table")
    if n and (result.tokens.text_id.min() < 0 or result.tokens.text_id.max() >= len(result.texts)):
        raise _corrupt(name, "token table points outside the texts")
    # images and audio: the hash covers pixels and samples, which a saved analysis does not carry
    media = isinstance(result.extra, dict) and "inputs" in result.extra
    if result.texts and not media and Corpus(result.texts, "saved").sha != result.corpus_sha:
        raise _corrupt(name, "texts do not match the corpus hash")


def looks_saved(path: str | Path) -> bool:
    """True for an existing ``.isoscope`` zip or a folder holding a saved analysis manifest."""
    path = Path(path).expanduser()
    return (path.is_dir() and (path / MANIFEST).exists()) or (
        path.is_file() and zipfile.is_zipfile(path)
    )


# ----------------------------------------------------------------------------- the model behind it


class ModelUnavailableError(SavedAnalysisError):
    """A view needs the model itself, which cannot be loaded on this machine."""


def model_info_from_card(card: dict) -> ModelInfo:
    """The :class:`ModelInfo` of a saved model card (fields a newer card adds are ignored)."""
    defaults: dict[str, Any] = {
        "source": "unknown",
        "display_name": str(card.get("source", "saved model")),
        "architecture": "unknown",
        "model_type": "unknown",
        "num_layers": 0,
        "hidden_size": 0,
        "num_heads": 0,
        "num_parameters": 0,
        "position_embedding": "unknown",
        "is_causal": False,
        "max_positions": None,
        "has_mlm_head": False,
        "random_init": False,
        "device": "saved analysis",
        "dtype": "float32",
    }
    names = [f.name for f in dataclasses.fields(ModelInfo)]
    values: dict[str, Any] = {n: card.get(n, defaults.get(n)) for n in names}
    return ModelInfo(**values)


class SavedModel(LoadedModel):
    """Stands in for the model of a saved analysis: ``info`` and ``fingerprint`` come from the
    file; anything else (``model``, ``tokenizer``, ``encoder``, ``device``...) loads the real
    model through ``loader`` on first use, or raises :class:`ModelUnavailableError` saying that
    this view needs the model. The loaded model must have the saved fingerprint."""

    def __init__(self, result: ExtractionResult, loader: Callable[[], LoadedModel]) -> None:
        # LoadedModel's dataclass __init__ is bypassed on purpose: its fields resolve lazily.
        object.__setattr__(self, "info", model_info_from_card(result.model))
        object.__setattr__(self, "fingerprint", result.model_fingerprint)
        object.__setattr__(self, "_loader", loader)
        object.__setattr__(self, "_real", None)

    @property
    def weights_dir(self) -> Path | None:  # a class attribute on LoadedModel: resolve lazily too
        return self.load().weights_dir

    @weights_dir.setter
    def weights_dir(self, value: Path | None) -> None:
        raise AttributeError("a saved analysis's weights_dir is its real model's")

    def __repr__(self) -> str:
        return f"SavedModel({self.info.source!r}, fingerprint={self.fingerprint!r})"

    def load(self) -> LoadedModel:
        """The real model (loaded once), checked against the saved fingerprint."""
        real = self.__dict__["_real"]
        if real is not None:
            return real
        try:
            real = self.__dict__["_loader"]()
        except IsoscopeError as exc:
            raise ModelUnavailableError(
                f"this view needs the model itself ({self.info.source}), which cannot be loaded on "
                f"this machine ({exc}); a saved analysis holds the statistics and the token sample "
                "only: copy the checkpoint here under the same path to use this view"
            ) from None
        if real.fingerprint != self.fingerprint:
            raise ModelUnavailableError(
                f"this view needs the model itself, but {self.info.source!r} on this machine is not "
                f"the checkpoint this analysis was saved from (fingerprint {real.fingerprint} here, "
                f"{self.fingerprint} saved); copy the original checkpoint here to use this view"
            )
        self.__dict__["_real"] = real
        return real

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_loader", "_real"):
            raise AttributeError(name)
        return getattr(self.load(), name)
