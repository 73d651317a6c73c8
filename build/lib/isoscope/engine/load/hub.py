"""Hugging Face Hub ids downloaded on demand, through ``huggingface_hub``, into its own cache.

:func:`fetch` resolves ``org/name[@revision]`` to a complete snapshot folder:

1. ``HF_HUB_OFFLINE=1`` (read at call time): the cache only, as before downloads existed;
2. the repo's file list and commit (``model_info``); a full commit sha already cached needs no
   network, and no network at all falls back to the cache;
3. only what the loader reads (:func:`files_to_fetch`): ``config.json``, safetensors weights
   (one file, or the index and its shards), tokenizer, processor and generation files. Never
   code files; never pickle weights (``*.bin``/``*.pt``/``*.pth``) unless pickle is opted in;
4. ``config.json`` first: a config with ``auto_map`` (remote code) is refused before any weights;
5. the disk space (and a shared server's quota) checked against the bytes still missing;
6. the small files (tokenizer included), then ``before_weights`` (the time preflight), then
   the weights, reporting ``progress(bytes done, bytes to fetch)`` (the project's protocol,
   :mod:`isoscope.engine.budget.progress`; :class:`DownloadMeter` adds the rate and an ETA); a
   ``progress`` that returns ``False`` (or raises, as Streamlit's stop does) cancels.

Weight files are downloaded into huggingface_hub's cache layout by :class:`_Downloader` itself,
through ``blobs/<etag>.part``: a cancelled, failed or killed download keeps its part, and the next
run asks only for the rest (``Range: bytes=N-``); the part is renamed to its blob once its size
and hash are the file's, so nothing half-written is ever seen as complete. The small files go
through ``hf_hub_download`` (a temporary name, renamed when complete). A connection dropped
mid-file is resumed with a range request within the run, and a run after a cancel fetches only
what is still missing. The commit sha is the snapshot folder's name, which the model card records.

:func:`fetch_files` fetches chosen files of a repo that is not a Transformers checkpoint (a
released sparse autoencoder in a repo of many) under the same rules.

``HF_TOKEN`` (or ``hf auth login``) is honoured by huggingface_hub; ``HF_ENDPOINT`` is read at
call time (the tests' stand-in Hub).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from isoscope.engine.budget.progress import Progress, eta_seconds, report
from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.source import ModelSource, check_revision

SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_INDEX = "pytorch_model.bin.index.json"
# What the loader reads besides weights: config, tokenizer, processor and generation files.
SUPPORT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "*.model",  # sentencepiece (tokenizer.model, spiece.model)
    "chat_template.json",
    "chat_template.jinja",
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
)
PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth")
QUOTA_REFUSED = (
    "This shared server's download quota (ISOSCOPE_HUB_QUOTA_GB) has no room for this model; "
    "choose a model from the list or one already downloaded, or ask the operator."
)
PART_SUFFIX = ".part"  # a weight file being downloaded: kept on a cancel, resumed with Range
DISK_MARGIN = 1.05  # 5 % above the bytes to fetch, for the file system's own use
TRUE = ("1", "true", "yes", "on")
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")  # what a ref file holds and a snapshot folder is named


class DownloadCancelled(ModelLoadError):
    """The user stopped a download; the files already complete stay in the cache."""


class DownloadMeter:
    """Bytes done of bytes to fetch as a line with the rate and an ETA at the mean rate so far:
    ``12.0 of 48.0 MB, 3.1 MB/s, about 12 s left``. Start it when the download starts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()

    def eta_s(self, done: int, total: int) -> float | None:
        return eta_seconds(done, total, self.clock() - self.started)

    def describe(self, done: int, total: int) -> str:
        text = f"{_megabytes(done)} of {_megabytes(total)} MB"
        eta = self.eta_s(done, total)
        if eta is not None:
            rate = done / (self.clock() - self.started)
            text += f", {rate / 1e6:.1f} MB/s, about {eta:.0f} s left"
        return text


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``, which huggingface_hub also reads) as
    the user set it now: the cache only when true."""
    return any(
        os.environ.get(name, "").strip().lower() in TRUE
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_cache_dir() -> Path:
    """huggingface_hub's cache folder: ``HF_HUB_CACHE`` or ``HF_HOME/hub`` as set now, else
    the folder huggingface_hub chose when it was imported."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _endpoint() -> str | None:
    return os.environ.get("HF_ENDPOINT") or None


def _repo_folder(repo_id: str) -> Path:
    return hub_cache_dir() / ("models--" + repo_id.replace("/", "--"))


def cached_snapshot(
    source: ModelSource, complete: Callable[[Path], bool] | None = None
) -> Path | None:
    """The complete snapshot of ``source`` (a Hub id) in the local cache, or None. A snapshot
    holding only some files (an interrupted download) does not count, nor a revision or a ref
    file that would lead outside the repo's cache folder (:func:`inside_cache`); ``complete`` says
    what complete means (default: a model's, :func:`snapshot_complete`)."""
    folder = _repo_folder(source.repo_id)
    revision = check_revision(source.revision or "main", source.repo_id)
    ref = inside_cache(folder / "refs" / revision, folder)
    sha = revision
    if ref.is_file():
        try:
            sha = ref.read_text(errors="replace")[:100].strip()
        except OSError:
            return None
        if not COMMIT_SHA.fullmatch(sha):
            return None  # a damaged or planted ref names no commit: not a cached snapshot
    snapshot = inside_cache(folder / "snapshots" / sha, folder)
    return snapshot if (complete or snapshot_complete)(snapshot) else None


def inside_cache(path: Path, folder: Path) -> Path:
    """``path`` when it resolves (symlinks followed) inside the repo's cache ``folder``, else
    :class:`ModelLoadError`: a Hub lookup never reads or writes anything outside the cache."""
    root = folder.resolve()
    real = path.resolve()
    if real != root and root not in real.parents:
        raise ModelLoadError(
            f"the Hugging Face cache entry {path.name!r} of {folder.name!r} leads outside the "
            "cache; give a branch, tag or commit sha as the revision (or drop @revision)"
        )
    return path


def to_download(source: str) -> ModelSource | None:
    """The Hub id behind ``source`` (itself, or the model a ``random-like:`` copy copies) when
    it is not in the cache and downloads are allowed, else None: what a caller fetches before
    a load (the UI with its bar, the Ray driver once for every worker)."""
    from isoscope.engine.load.source import parse_source

    parsed = parse_source(source).origin
    if parsed.kind != "hub" or offline() or cached_snapshot(parsed) is not None:
        return None
    return parsed


def config_folder(source: ModelSource) -> Path:
    """A folder holding the ``config.json`` of the Hub id ``source``: the cached snapshot, else
    that one file fetched into the cache (a snapshot with only a config is not "cached"); what
    the sidebar reads to decide whether a model is a decoder before the download starts."""
    cached = cached_snapshot(source)
    if cached is not None:
        return cached
    if offline():
        raise ModelLoadError(f"{source.text!r} is not in the local Hugging Face cache")
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import GatedRepoError

    try:
        path = hf_hub_download(
            source.repo_id,
            "config.json",
            revision=source.revision,
            cache_dir=hub_cache_dir(),
            endpoint=_endpoint(),
        )
    except GatedRepoError:
        raise gated(source) from None
    return Path(path).parent


def snapshot_complete(folder: Path) -> bool:
    """``config.json`` and every weight file the index names (or one weights file) are there."""
    if not (folder / "config.json").is_file():
        return False
    for index in (SAFETENSORS_INDEX, PICKLE_INDEX):
        if (folder / index).is_file():
            try:
                shards = set(json.loads((folder / index).read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError, AttributeError):
                return False
            return all((folder / shard).is_file() for shard in shards)
    return any(
        p.is_file()
        and any(fnmatch.fnmatch(p.name, pat) for pat in ("*.safetensors",) + PICKLE_WEIGHTS)
        for p in folder.iterdir()
    )


def files_to_fetch(files: dict[str, int], repo_id: str, *, allow_pickle: bool) -> list[str]:
    """The files of a repo (name -> size) the loader reads, ``config.json`` first: safetensors
    weights, else pickle weights only when ``allow_pickle``; never code or other files."""
    top = {name: size for name, size in files.items() if "/" not in name}
    if "config.json" not in top:
        raise ModelLoadError(
            f"Hub repo {repo_id!r} has no config.json at its top level: isoscope loads "
            "Transformers checkpoints (config.json + safetensors weights)"
        )
    support = [n for n in top if any(fnmatch.fnmatch(n, pat) for pat in SUPPORT_FILES)]
    weights = _weights(top, SAFETENSORS_INDEX, ("*.safetensors",))
    if not weights:
        pickled = _weights(top, PICKLE_INDEX, PICKLE_WEIGHTS)
        if not pickled:
            raise ModelLoadError(
                f"Hub repo {repo_id!r} has no safetensors weights (and no other weights "
                "isoscope can read); pick a repo that ships *.safetensors"
            )
        if not allow_pickle:
            raise ModelLoadError(
                f"Hub repo {repo_id!r} has only pickle weights ({pickled[-1]}), which can run "
                "arbitrary code when loaded; nothing was downloaded. Pick a repo with safetensors "
                "weights, or opt in with --allow-pickle (UI: 'Allow pickle weights') if you "
                "trust it"
            )
        weights = pickled
    ordered = ["config.json"] + sorted(n for n in support if n != "config.json")
    return ordered + [w for w in weights if w not in ordered]


def _is_weights(name: str) -> bool:
    """A weight file (not the index: it is small, and read to find the shards)."""
    return any(fnmatch.fnmatch(name, p) for p in ("*.safetensors",) + PICKLE_WEIGHTS)


def _weights(top: dict[str, int], index: str, patterns: tuple[str, ...]) -> list[str]:
    """Weight files matching ``patterns``: with ``index`` present, the index plus every shard
    (read once the index is fetched, so listed here by pattern); else the single files."""
    found = sorted(n for n in top if any(fnmatch.fnmatch(n, p) for p in patterns))
    if "training_args.bin" in found:
        found.remove("training_args.bin")
    return ([index] if index in top else []) + found


def fetch(
    source: ModelSource,
    *,
    allow_pickle: bool = False,
    progress: Progress | None = None,
    quota_bytes: int | None = None,
    check_weights: Callable[[dict[str, int]], None] | None = None,
    before_weights: Callable[[dict[str, int], Path], None] | None = None,
) -> Path:
    """The complete snapshot folder of the Hub id ``source``, downloading what is missing (see
    the module docstring). :class:`ModelLoadError` with one actionable message per failure.
    ``check_weights`` gets the parameters per dtype read from the safetensors headers (range
    requests) before any weights are fetched, and may refuse (the memory preflight);
    ``before_weights`` gets the same census and the snapshot folder once the small files
    (tokenizer included) are there and before the weights are (the time preflight)."""
    cached = cached_snapshot(source)
    if offline():
        if cached is not None:
            return cached
        raise ModelLoadError(
            f"{source.text!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 "
            "forbids downloads: unset HF_HUB_OFFLINE to download it, or pass a checkpoint folder"
        )
    if cached is not None and cached.name == source.revision:
        return cached  # a pinned commit never changes: no network needed
    info = _repo_info(source, cached)
    if isinstance(info, Path):
        return info  # the Hub could not be reached: the cached copy
    sha, files = info
    if not COMMIT_SHA.fullmatch(sha):
        raise ModelLoadError(
            f"the Hub named commit {sha[:60]!r} for {source.repo_id!r}, which is not a commit sha; "
            "check HF_ENDPOINT"
        )
    names = files_to_fetch(files, source.repo_id, allow_pickle=allow_pickle)
    repo_folder = _repo_folder(source.repo_id)
    snapshot = inside_cache(repo_folder / "snapshots" / sha, repo_folder)
    missing = [n for n in names if not (snapshot / n).is_file()]
    download = _Downloader(source, sha, files, progress)
    if "config.json" in missing:
        download.file("config.json")
        missing.remove("config.json")
    _refuse_remote_code(snapshot / "config.json", source)
    census: dict[str, int] = {}
    safetensors = [n for n in names if n.endswith(".safetensors")]
    if safetensors and (check_weights is not None or before_weights is not None):
        from isoscope.engine.load.preflight import folder_census

        census = download.census(n for n in safetensors if n in missing)
        present = [snapshot / n for n in safetensors if n not in missing]
        for dtype, n in folder_census(snapshot, present).items():
            census[dtype] = census.get(dtype, 0) + n
        if check_weights is not None:
            check_weights(census)
    needed = sum(files.get(n, 0) for n in missing)
    _check_space(needed, source, quota_bytes)
    download.total = download.done + needed
    weights = [n for n in missing if _is_weights(n)]
    for name in [n for n in missing if n not in weights]:
        download.file(name)
    if before_weights is not None and census:
        before_weights(census, snapshot)
    for name in weights:
        download.file(name)
    if not snapshot_complete(snapshot):
        raise ModelLoadError(
            f"the download of {source.text!r} is incomplete (the weight index names files the "
            "repo does not list); check the repo's files on the Hub"
        )
    _record_ref(source, sha)
    return snapshot


def fetch_files(
    source: ModelSource,
    choose: Callable[[dict[str, int]], list[str]],
    complete: Callable[[Path], bool],
    *,
    progress: Progress | None = None,
    quota_bytes: int | None = None,
) -> Path:
    """The snapshot folder of the Hub id ``source`` holding the files ``choose`` picks from the
    repo's list (name -> size; names may lie in sub-folders), under :func:`fetch`'s rules:
    ``HF_HUB_OFFLINE`` reads the cache only, a pinned commit already cached needs no network, an
    unreachable Hub falls back to the cache, a gated or unknown repo, an unknown revision and a
    full disk (or quota) each give one :class:`ModelLoadError`, and weight files resume from
    their part. ``complete`` says whether a cached snapshot already holds what is needed. For
    files that are not a Transformers checkpoint: a released sparse autoencoder inside a repo
    of many (:mod:`isoscope.analysis.sae.load`); ``choose`` refuses what must not be fetched."""
    cached = cached_snapshot(source, complete)
    if offline():
        if cached is not None:
            return cached
        raise ModelLoadError(
            f"{source.text!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 "
            "forbids downloads: unset HF_HUB_OFFLINE to download it, or pass a local folder"
        )
    if cached is not None and cached.name == source.revision:
        return cached
    info = _repo_info(source, cached)
    if isinstance(info, Path):
        return info
    sha, files = info
    names = choose(files)
    snapshot = _repo_folder(source.repo_id) / "snapshots" / sha
    missing = [n for n in names if not (snapshot / n).is_file()]
    download = _Downloader(source, sha, files, progress)
    needed = sum(files.get(n, 0) for n in missing)
    _check_space(needed, source, quota_bytes)
    download.total = needed
    for name in sorted(missing, key=_is_weights):  # the small files first
        download.file(name)
    _record_ref(source, sha)
    return snapshot


def _record_ref(source: ModelSource, sha: str) -> None:
    """Name the commit under its branch or tag (``refs/main``), as ``snapshot_download`` does,
    once the snapshot is complete: offline runs then find it by that name."""
    revision = check_revision(source.revision or "main", source.repo_id)
    if revision == sha or not COMMIT_SHA.fullmatch(sha):
        return
    folder = _repo_folder(source.repo_id)
    ref = inside_cache(folder / "refs" / revision, folder)
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(sha)


def _repo_info(source: ModelSource, cached: Path | None) -> tuple[str, dict[str, int]] | Path:
    """``(commit sha, {file: size})`` of the revision, or the cached snapshot when the Hub cannot
    be reached; :class:`ModelLoadError` for a gated, unknown or failing repo."""
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        info = HfApi(endpoint=_endpoint()).model_info(
            source.repo_id, revision=source.revision, files_metadata=True
        )
    except GatedRepoError:
        raise gated(source) from None
    except RevisionNotFoundError:
        raise ModelLoadError(
            f"Hub repo {source.repo_id!r} has no revision {source.revision!r}: use a branch, tag "
            "or commit sha that exists (or drop @revision for the default branch)"
        ) from None
    except RepositoryNotFoundError:
        raise ModelLoadError(
            f"no Hub repo {source.repo_id!r} (or it is private): check the id, or set HF_TOKEN "
            "to a token that can read it"
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        if cached is not None:
            return cached
        raise ModelLoadError(
            f"the Hub answered {status} for {source.repo_id!r} and it is not cached; try again later"
        ) from None
    except (OSError, httpx2.TransportError) as exc:  # no network, offline mode, DNS, timeout
        return _unreachable(source, cached, exc)
    files = {s.rfilename: int(s.size or 0) for s in (info.siblings or [])}
    return str(info.sha), files


def gated(source: ModelSource) -> ModelLoadError:
    """What a gated repo (Llama, Gemma, Mistral) is told: its metadata is public but its files
    answer 401/403 ``GatedRepo`` until the licence is accepted and a token of that account sent,
    so running the command again cannot help."""
    page = f"{(_endpoint() or 'https://huggingface.co').rstrip('/')}/{source.repo_id}"
    return ModelLoadError(
        f"Hub repo {source.repo_id!r} is gated: accept its licence on {page}, then set HF_TOKEN "
        "to a token of that account (or run `hf auth login`) and try again"
    )


def _unreachable(source: ModelSource, cached: Path | None, exc: BaseException) -> Path:
    if cached is not None:
        return cached
    raise ModelLoadError(
        f"cannot reach the Hugging Face Hub ({type(exc).__name__}) and {source.text!r} is not in "
        "the local cache: connect to the network (check HF_ENDPOINT and proxies), or download it "
        f"on a connected machine (`hf download {source.repo_id}`) and copy the cache"
    )


def _refuse_remote_code(config: Path, source: ModelSource) -> None:
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        raise ModelLoadError(f"Hub repo {source.repo_id!r} has an unreadable config.json") from None
    if isinstance(data, dict) and data.get("auto_map"):
        raise ModelLoadError(
            f"Hub repo {source.repo_id!r} needs its own Python code (config.json has auto_map), "
            "which isoscope never runs; no weights were downloaded. Pick a checkpoint of an "
            "architecture built into transformers"
        )


def free_disk_bytes(folder: Path) -> int:
    """Free bytes on the file system that holds ``folder`` (or its nearest existing parent)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def cache_bytes() -> int:
    """Bytes the Hugging Face cache holds now (its blobs)."""
    root = hub_cache_dir()
    if not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.glob("models--*/blobs/*") if p.is_file())


def _check_space(needed: int, source: ModelSource, quota_bytes: int | None) -> None:
    if quota_bytes is not None and cache_bytes() + needed > quota_bytes:
        raise ModelLoadError(QUOTA_REFUSED)
    free = free_disk_bytes(hub_cache_dir())
    if needed * DISK_MARGIN > free:
        raise ModelLoadError(
            f"{source.text!r} needs {_megabytes(needed)} MB of downloads but the disk holding the "
            f"Hugging Face cache (HF_HOME) has {_megabytes(free)} MB free: free some space, or "
            "point HF_HOME at a larger disk; nothing was downloaded"
        )


class _Downloader:
    """Fetches files of one commit into the cache, reporting bytes through ``progress``."""

    def __init__(self, source, sha, sizes, progress) -> None:
        self.source, self.sha, self.sizes, self.progress = source, sha, sizes, progress
        self.total = sizes.get("config.json", 0)
        self.done = 0

    def file(self, name: str) -> None:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import GatedRepoError

        self.tick(0)  # a stop asked for between files
        before = self.done
        try:
            if _is_weights(name):
                self._resumable(name)
            else:
                hf_hub_download(  # type: ignore[call-overload]  # tqdm_class: any bar factory works
                    self.source.repo_id,
                    name,
                    revision=self.sha,
                    cache_dir=hub_cache_dir(),
                    endpoint=_endpoint(),
                    tqdm_class=self._bar,
                )
        except ModelLoadError:  # a cancel included
            raise
        except GatedRepoError:
            raise gated(self.source) from None
        except Exception as exc:
            raise ModelLoadError(
                f"the download of {name} from {self.source.repo_id!r} failed "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                "run the same command again to resume: complete files are kept"
            ) from None
        self.done = before + self.sizes.get(name, 0)  # a cached blob reports no bytes
        report(self.progress, self.done, self.total)

    def _resumable(self, name: str) -> None:
        """Download weight file ``name`` into the cache's layout (``blobs/<etag>``, linked from
        ``snapshots/<sha>/<name>``) through ``<etag>.part``, which a cancel or a failure keeps:
        the next run asks for the rest with ``Range: bytes=<part's size>-``. The part becomes the
        blob only once its size (and, for an LFS file, its sha256) is the file's, so nothing
        half-written is ever seen as complete."""
        from filelock import FileLock
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.file_download import http_get
        from huggingface_hub.utils import build_hf_headers

        url = hf_hub_url(self.source.repo_id, name, revision=self.sha, endpoint=_endpoint())
        meta = get_hf_file_metadata(url, endpoint=_endpoint())
        folder = _repo_folder(self.source.repo_id)
        blob = inside_cache(folder / "blobs" / str(meta.etag), folder)
        pointer = inside_cache(folder / "snapshots" / self.sha / name, folder)
        blob.parent.mkdir(parents=True, exist_ok=True)
        part = blob.with_name(blob.name + PART_SUFFIX)
        with FileLock(str(part) + ".lock"):  # one writer per part, across processes
            if not blob.is_file():
                with part.open("r+b" if part.is_file() else "wb") as fh:
                    fh.seek(0, os.SEEK_END)
                    resume = fh.tell()
                    if meta.size is None or resume < meta.size:
                        self.tick(resume)  # the bytes a cancelled run already has
                        http_get(
                            meta.location,
                            fh,
                            resume_size=resume,
                            headers=build_hf_headers(),
                            expected_size=meta.size,
                            tqdm_class=self._bar,  # type: ignore[arg-type]  # any bar factory works
                        )
                _complete(part, blob, meta.size, str(meta.etag), name)
            _link(blob, pointer)

    def census(self, names) -> dict[str, int]:
        """Parameters per dtype of the remote safetensors files ``names``, from their headers
        (two range requests each: the 8-byte length, then the JSON header)."""
        import struct

        from isoscope.engine.load.preflight import census_of_headers

        headers = []
        for name in names:
            (length,) = struct.unpack("<Q", self._range(name, 0, 7)[:8])
            headers.append(json.loads(self._range(name, 8, 7 + length)[:length]))
        return census_of_headers(headers)

    def _range(self, name: str, start: int, end: int) -> bytes:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.errors import GatedRepoError
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(self.source.repo_id, name, revision=self.sha, endpoint=_endpoint())
        headers = {**build_hf_headers(), "Range": f"bytes={start}-{end}"}
        try:
            response = get_session().get(url, headers=headers, follow_redirects=True)
            hf_raise_for_status(response)
        except GatedRepoError:
            raise gated(self.source) from None
        except Exception as exc:
            raise ModelLoadError(
                f"cannot read the header of {name} in {self.source.repo_id!r} "
                f"({type(exc).__name__}); try again"
            ) from None
        return response.content

    def _bar(self, **_kwargs) -> _Bar:
        return _Bar(self)

    def tick(self, n: int) -> None:
        self.done += n
        if not report(self.progress, self.done, self.total):
            raise DownloadCancelled(
                f"download of {self.source.text!r} stopped; the files already complete stay in "
                "the cache and the next run fetches only the rest"
            )


def _complete(part: Path, blob: Path, size: int | None, etag: str, name: str) -> None:
    """Rename ``part`` to ``blob`` when it is the whole file: its size, and for an LFS file (a
    64-hex etag is its sha256) its hash; a part that is not is removed, to be fetched again."""
    if size is not None and part.stat().st_size != size:
        part.unlink(missing_ok=True)
        raise ModelLoadError(
            f"{name} downloaded to the wrong size; run the same command again to fetch it afresh"
        )
    if len(etag) == 64 and all(c in "0123456789abcdef" for c in etag):
        import hashlib

        digest = hashlib.sha256()
        with part.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                digest.update(chunk)
        if digest.hexdigest() != etag:
            part.unlink(missing_ok=True)
            raise ModelLoadError(
                f"{blob.name[:12]}: the downloaded bytes do not match the Hub's hash"
            )
    part.replace(blob)


def _link(blob: Path, pointer: Path) -> None:
    """``snapshots/<sha>/<name>`` pointing at its blob, as huggingface_hub lays the cache out
    (a relative symlink; a copy where the file system has none)."""
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.exists():
        return
    try:
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    except OSError:
        shutil.copyfile(blob, pointer)


class _Bar:
    """The part of tqdm's interface huggingface_hub's ``http_get`` uses."""

    def __init__(self, downloader: _Downloader) -> None:
        self.downloader = downloader

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int | float = 1) -> None:
        self.downloader.tick(int(n))

    def close(self) -> None:
        return None


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f}"
