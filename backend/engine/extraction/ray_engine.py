"""The extraction on a Ray cluster (Ray Data): the same :class:`ExtractionResult` as one process.

``isoscope analyze ... --engine ray [--ray-address local|auto|ADDRESS] [--workers N]
[--gpus-per-worker G]`` runs :func:`run_ray_extraction`:

1. The corpus (a .txt/.csv/.jsonl/.parquet file or a folder of such shards) is read as a Ray
   dataset: one row per file (``ray.data.read_binary_files``), each parsed on a worker by the
   same parser as the local engine (:func:`backend.engine.inputs.corpus.texts_from_bytes`). The driver orders
   the shards by sorted path and numbers the texts, so text indices (and therefore the token
   sample) never depend on how many workers read them.
2. The texts become a dataset of ``(text_id, text)`` rows, one block per shard (uneven blocks are
   fine), and ``map_batches`` sends chunks of texts to a fixed pool of actors
   (``compute=ray.data.ActorPoolStrategy(size=N)``, the API of the pinned Ray 2.60; the older
   ``concurrency=`` argument is deprecated there). Each actor loads the model once, on its GPU
   (``num_gpus=G``) or CPU, and returns per-chunk partial statistics and sample candidates,
   never hidden states.
   Images and audio clips (``--images`` / ``--audio``): the driver reads the folder as the local
   engine does (same limits and notices), plans the batches with the model's layout, and ships
   each chunk's decoded items to the actors.
3. The driver merges the partials as they arrive (Chan et al.'s parallel update, exact to float64
   rounding; see docs/methods.md section 9) and finishes the result exactly as the local engine does.

Faults: Ray Data restarts a dead actor and retries its chunk (its actor pool runs with
``max_restarts=-1, max_task_retries=-1``), so a worker killed mid-run costs time, not
exactness. A local instance started here is shut down in ``finally`` (Ctrl-C included); a
cluster we only connected to is left running. An unreachable address fails in seconds with one
:class:`RayEngineError` line, because ``ray.init`` itself would retry for minutes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.engine.budget.progress import Progress
from backend.engine.errors import InputError, IsoscopeError
from backend.engine.inputs.corpus import MAX_TEXTS, Corpus, corpus_files, corpus_from_shards

CONNECT_TIMEOUT_S = 5.0


class RayEngineError(IsoscopeError):
    """The Ray cluster cannot be used as asked (unreachable, too small, a worker-side failure)."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide to run: ``address`` is ``local`` (a private instance, shut down after),
    ``auto`` (the cluster ``ray start --head`` started on this machine) or ``HOST:PORT`` /
    ``ray://HOST:PORT``; ``None`` uses the instance this process is already connected to."""

    address: str | None = "local"
    workers: int | None = None  # None: every CPU (or every GPU // gpus_per_worker) of the cluster
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    num_cpus: int | None = None  # only for address="local": CPUs of the private instance

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise InputError(f"--workers must be 1 or more, got {self.workers}")
        if self.gpus_per_worker < 0:
            raise InputError(f"--gpus-per-worker must be 0 or more, got {self.gpus_per_worker}")
        if self.cpus_per_worker <= 0:
            raise InputError(f"CPUs per worker must be positive, got {self.cpus_per_worker}")


# ----------------------------------------------------------------------------- the session


def _quiet_ray() -> None:
    for name in ("ray", "ray.data", "ray._private", "ray.util"):
        logging.getLogger(name).setLevel(logging.ERROR)


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast when nothing listens at ``address`` (``ray.init`` would retry for minutes)."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RayEngineError(
            f"--ray-address {address!r} is not local, auto, HOST:PORT or ray://HOST:PORT; "
            "give the address `ray start --head` printed (e.g. 10.0.0.5:6379)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RayEngineError(
            f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); start one with "
            "`ray start --head` on that machine, check the host and port, or use --ray-address local"
        ) from None


@contextlib.contextmanager
def ray_session(options: RayOptions) -> Iterator[Any]:
    """Connect to (or start) Ray for the duration of the block; yields the ``ray`` module.

    A connection made here is closed in ``finally`` (Ctrl-C included): for ``local`` that stops
    every Ray process this call started; a remote cluster keeps running.
    """
    # Ray's C++ core logs to stderr (e.g. a warning on every actor pool); the CLI keeps stderr for
    # its own progress. Errors still reach the driver as exceptions.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    import ray

    _quiet_ray()
    if options.address is None and ray.is_initialized():
        yield ray
        return
    if ray.is_initialized():
        raise RayEngineError(
            "this process is already connected to Ray; use that connection (address None)"
        )
    address = options.address or "local"
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "configure_logging": True,
    }
    if address == "local":
        kwargs["num_cpus"] = options.num_cpus
    elif address != "auto":
        check_reachable(address)
    try:
        try:
            # Ray's core writes to fd 2 while connecting (a line per retry when a port answers
            # but is no Ray head); Ray's own processes log to its session folder anyway
            with _stderr_silenced():
                ray.init(address=address, **kwargs)
        except ConnectionError as exc:
            if address == "auto":
                raise RayEngineError(
                    "no Ray cluster runs on this machine (--ray-address auto); start one with "
                    "`ray start --head`, give its address, or use --ray-address local"
                ) from None
            raise RayEngineError(
                f"cannot connect to a Ray cluster at {address} ({str(exc).splitlines()[0][:120]}); "
                "start one with `ray start --head` there, or use --ray-address local"
            ) from None
        _configure_data_context()
        yield ray
    finally:
        ray.shutdown()  # also after an interrupted ray.init: stops whatever it had started


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Send file descriptor 2 (where Ray's C++ core logs) to /dev/null for the block."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _configure_data_context() -> None:
    import ray.data

    for handler in logging.getLogger("ray.data").handlers:  # its console handler logs INFO
        if not isinstance(handler, logging.FileHandler) and "File" not in type(handler).__name__:
            handler.setLevel(logging.ERROR)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.log_internal_stack_trace = False
    ctx.execution_options.preserve_order = False  # the merge does not depend on order


def pool_size(ray_module: Any, options: RayOptions) -> int:
    """Workers to start: ``options.workers``, checked against the cluster's CPUs and GPUs."""
    resources = ray_module.cluster_resources()
    cpus = float(resources.get("CPU", 0))
    gpus = float(resources.get("GPU", 0))
    if options.gpus_per_worker > 0:
        fit = int(gpus // options.gpus_per_worker)
        if fit < 1:
            raise RayEngineError(
                f"the cluster has {gpus:g} GPU(s), fewer than --gpus-per-worker "
                f"{options.gpus_per_worker:g}; add GPU nodes or lower --gpus-per-worker"
            )
    else:
        fit = int(cpus // options.cpus_per_worker)
    fit = min(fit, int(cpus // options.cpus_per_worker)) if cpus else fit
    if fit < 1:
        raise RayEngineError("the Ray cluster has no free CPU for a worker; add nodes")
    if options.workers is None:
        return fit
    if options.workers > fit:
        what = "GPUs" if options.gpus_per_worker > 0 else "CPUs"
        raise RayEngineError(
            f"--workers {options.workers} needs more {what} than the cluster has "
            f"({cpus:g} CPUs, {gpus:g} GPUs: room for {fit}); lower --workers or add nodes"
        )
    return options.workers


# ----------------------------------------------------------------------------- the corpus


def _parse_shard(row: dict[str, Any]) -> dict[str, Any]:
    """Ray map: one file's bytes -> its raw texts and notices (the local engine's parser)."""
    import json

    from backend.engine.inputs.corpus import texts_from_bytes

    raw = bytes(row["bytes"])
    name = Path(str(row["path"])).name
    texts, notices = texts_from_bytes(raw, name) if raw.strip() else ([], [])
    return {"path": str(row["path"]), "texts": json.dumps(texts), "notices": json.dumps(notices)}


def read_corpus(ray_module: Any, path: str | Path, max_texts: int = MAX_TEXTS) -> Corpus:
    """The corpus at ``path`` read as a Ray dataset, numbered in sorted path order.

    Equals :func:`backend.engine.inputs.corpus.load_corpus_file` on the same path (same parser, same cleaning,
    same limits), so both engines analyse the same texts under the same indices.
    """
    import json

    from backend.engine.inputs.files import check_size

    path = Path(path)
    files = corpus_files(path)
    for file in files:
        check_size(file)
    ds = ray_module.data.read_binary_files([str(f) for f in files], include_paths=True)
    rows = ds.map(_parse_shard).take_all()
    by_path = {_norm(r["path"]): r for r in rows}
    shards = []
    for file in files:
        row = by_path.get(_norm(str(file)))
        if row is None:
            raise RayEngineError(f"Ray did not read {file}; is it readable from every node?")
        shards.append((file.name, json.loads(row["texts"]), json.loads(row["notices"])))
    if path.is_dir():
        return corpus_from_shards(shards, path.name or str(path), max_texts)
    from backend.engine.inputs.corpus import TEXT_SUFFIXES

    name = path.name if path.suffix.lower() in TEXT_SUFFIXES else path.name + ".txt"
    return corpus_from_shards(shards, name, max_texts)


def _norm(path: str) -> str:
    return str(Path(path.removeprefix("local://")).resolve())


def is_media_corpus(corpus: Any) -> bool:
    """Images or clips (:class:`backend.engine.inputs.media.MediaCorpus`) rather than texts."""
    return getattr(corpus, "kind", "text") != "text"


@dataclass(frozen=True)
class Plan:
    """The local engine's batches, grouped into chunks (one Ray task each).

    ``chunks`` hold global text indices in the order the local engine runs them (longest first),
    each chunk a run of whole local batches, so every forward pass sees the same padded batch as
    in one process and the hidden states are the same bit for bit. ``threshold``: the sampling
    priority of the k-th sampled token (k = min(sample_size, tokens)); workers send only
    candidates at or below it, so about k vectors cross the network in all.
    """

    chunks: list[np.ndarray]
    threshold: int | None
    num_tokens: int
    notes: tuple[str, ...] = ()  # the model's layout notes (ViTMAE's masking turned off, ...)


def plan_chunks(
    spec: ModelSpec, corpus: Corpus, settings: Any, workers: int, *, max_chunks: int = 4
) -> Plan:
    """Tokenize on the driver (tokenizer and config only, no weights) and plan the work.

    Images and clips: their token counts come from the model's layout and feature encoder, so the
    driver loads the model on its CPU once to plan (the workers still run every forward pass).
    """
    from backend.engine.budget.batching import plan_batches
    from backend.engine.extraction import token_priority, tokenize

    notes: tuple[str, ...] = ()
    group = None
    if is_media_corpus(corpus):
        from backend.engine.extraction.media import prepare_media
        from backend.engine.load.models import load_model

        stand_in = load_model(
            spec.source, device="cpu", dtype="float32", allow_pickle=spec.allow_pickle
        )
        tokenized = prepare_media(stand_in, list(corpus.items))
        group, notes = tokenized.group, tuple(stand_in.layout.notes)
    else:
        stand_in = planning_model(spec.source)
        tokenized = tokenize(stand_in, corpus.texts, settings.max_length)
    lengths = tokenized.lengths
    batches = plan_batches(lengths, settings.batch_size, settings.token_budget, group)
    # about max_chunks tasks per worker: load balance, progress and cheap retries
    target = max(1, math.ceil(len(corpus) / (max_chunks * workers)))
    chunks: list[np.ndarray] = []
    current: list[np.ndarray] = []
    size = 0
    for batch in batches:
        current.append(batch)
        size += len(batch)
        if size >= target:
            chunks.append(np.concatenate(current))
            current, size = [], 0
    empty = np.flatnonzero(lengths == 0)  # texts without tokens: no batch, but covered
    if len(empty):
        current.append(empty)
    if current:
        chunks.append(np.concatenate(current))

    include_pos, include_text = [], []
    analysed = tokenized.analysed(settings.exclude_special, settings.exclude_first)
    for t, keep in enumerate(analysed):
        pos = np.flatnonzero(keep)
        include_pos.append(pos)
        include_text.append(np.full(len(pos), t, dtype=np.int64))
    positions = np.concatenate(include_pos) if include_pos else np.zeros(0, np.int64)
    text_ids = np.concatenate(include_text) if include_text else np.zeros(0, np.int64)
    total = len(positions)
    k = min(settings.sample_size, total)
    threshold = None
    if 0 < k < total:
        priority = token_priority(settings.seed, text_ids, positions)
        threshold = int(np.partition(priority, k - 1)[k - 1])
    return Plan(chunks, threshold, total, notes)


def planning_model(source: str) -> Any:
    """What :func:`backend.engine.extraction.tokenize` needs of a model (tokenizer, max positions,
    a text layout), read from the checkpoint's tokenizer and config files without loading its
    weights."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoTokenizer

    from backend.engine.load import models
    from backend.engine.load.source import parse_source

    parsed = parse_source(source).origin  # a random-like copy plans like what it copies
    if parsed.family is not None:
        tokenizer = models.bundled_tokenizer()
        if parsed.family.builds == "default":  # built from the default model's config
            config = AutoConfig.from_pretrained(models.default_model_dir(), local_files_only=True)
            max_positions = getattr(config, "max_position_embeddings", None)
        else:  # media families plan no text; GPT-2's length stands in
            default = parsed.family.max_positions or 1024
            max_positions = int(parsed.option_dict.get("max_positions", default))
    else:
        folder, _ = models.resolve_folder(parsed)
        try:
            config = AutoConfig.from_pretrained(
                folder, trust_remote_code=False, local_files_only=True
            )
            tokenizer = AutoTokenizer.from_pretrained(
                folder, trust_remote_code=False, local_files_only=True
            )
        except Exception as exc:
            from backend.engine.errors import ModelLoadError

            raise ModelLoadError(
                f"cannot read the tokenizer or config of {source!r} on this machine "
                f"({str(exc).splitlines()[0][:200]}); the driver plans the batches with them"
            ) from None
        max_positions = getattr(config, "max_position_embeddings", None)
    # a text corpus is planned here (media corpora load a stand-in model): tokenize's modality
    # check reads a text layout
    return SimpleNamespace(
        tokenizer=tokenizer,
        info=SimpleNamespace(max_positions=max_positions, display_name=source),
        layout=SimpleNamespace(modality="text"),
    )


def work_dataset(ray_module: Any, corpus: Corpus, plan: Plan) -> Any:
    """One row per chunk (``text_ids`` and ``texts`` as JSON), so a Ray task never splits one.
    Images and clips travel decoded, pickled (``items``): the driver read the folder, so the
    workers need no access to it."""
    import json
    import pickle

    media = is_media_corpus(corpus)
    rows = [
        {
            "chunk": i,
            "text_ids": json.dumps([int(t) for t in chunk]),
            **(
                {"items": pickle.dumps([corpus.items[int(t)] for t in chunk])}
                if media
                else {"texts": json.dumps([corpus.texts[int(t)] for t in chunk])}
            ),
        }
        for i, chunk in enumerate(plan.chunks)
    ]
    return ray_module.data.from_items(rows, override_num_blocks=len(rows))


# ----------------------------------------------------------------------------- the workers


@dataclass(frozen=True)
class ModelSpec:
    """How every worker loads the model (the same source must be readable on every node)."""

    source: str
    device: str = "cpu"
    dtype: str = "float32"
    allow_pickle: bool = False
    quota_bytes: int | None = None  # a shared server's cap on the Hugging Face cache


class ExtractWorker:
    """A Ray Data actor: loads the model once, then turns chunks of ``(text_id, text)`` rows into
    one :class:`backend.engine.extraction.PartialExtraction` each (statistics + sample candidates)."""

    def __init__(
        self,
        spec: ModelSpec,
        settings: Any,
        threshold: int | None,
        threads: int = 1,
        batch_delay_s: float = 0.0,
    ) -> None:
        import torch

        from backend.engine.environment import quiet_libraries, use_offline_environment
        from backend.engine.load.models import load_model

        use_offline_environment()
        quiet_libraries()
        torch.set_num_threads(max(1, threads))
        self.loaded = load_model(
            spec.source, device=spec.device, dtype=spec.dtype, allow_pickle=spec.allow_pickle
        )
        self.settings = settings
        self.threshold = threshold
        self.batch_delay_s = batch_delay_s  # fault-injection tests only: keeps tasks in flight

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import json

        from backend.engine.extraction import extract_partial

        if self.batch_delay_s:
            time.sleep(self.batch_delay_s)
        import pickle

        media = "items" in batch
        parts = []
        payloads = batch["items"] if media else batch["texts"]
        for ids_json, payload in zip(batch["text_ids"], payloads, strict=True):
            part = extract_partial(
                self.loaded,
                pickle.loads(bytes(payload)) if media else json.loads(payload),
                self.settings,
                text_ids=np.asarray(json.loads(ids_json), dtype=np.int64),
            )
            if self.threshold is not None:
                part.sample = below_threshold(part.sample, self.threshold)
            parts.append(part)
        out = np.empty(len(parts), dtype=object)
        out[:] = parts
        return {"partial": out}


def below_threshold(sample: Any, threshold: int) -> Any:
    """The candidates of ``sample`` whose priority is at most ``threshold`` (a new object)."""
    from backend.engine.extraction import SampleCandidates

    keep = np.flatnonzero(sample.priority <= np.uint64(threshold))
    out = SampleCandidates(sample.limit, sample.num_states, sample.hidden_size, capacity=len(keep))
    out.commit(
        np.zeros(0, dtype=np.int64),
        sample.priority[keep],
        sample.text_id[keep],
        sample.position[keep],
        sample.vectors[:, keep, :],
    )
    return out


def sample_is_complete(partial: Any, threshold: int | None) -> bool:
    """True when cutting candidates at ``threshold`` lost none of the final sample.

    The merged sample is the ``need`` smallest priorities among the kept candidates; if it is
    full and its largest priority is within the cut-off, every dropped token (priority above the
    cut-off) ranks after all of them, so the sample equals the uncut one.
    """
    if threshold is None:
        return True
    need = min(partial.sample.limit, int(partial.stats.count))
    return len(partial.sample) == need and (
        need == 0 or int(partial.sample.priority.max()) <= threshold
    )


# ----------------------------------------------------------------------------- the driver


def _isoscope_cause(exc: BaseException) -> IsoscopeError | None:
    """The user-facing error a worker raised, unwrapped from Ray's exception wrappers."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, IsoscopeError):
            return e
        stack += [getattr(e, "cause", None), e.__cause__, e.__context__]
    return None


def run_ray_extraction(
    spec: ModelSpec,
    corpus: Corpus | str | Path,
    settings: Any = None,
    options: RayOptions | None = None,
    progress: Progress | None = None,
    *,
    batch_delay_s: float = 0.0,
    download_progress: Progress | None = None,
) -> Any:
    """The :class:`ExtractionResult` of ``spec`` on ``corpus``, computed on Ray (module doc).

    ``corpus`` is a :class:`Corpus` or a path (file or folder of shards) read as a Ray dataset,
    or images / clips (a :class:`backend.engine.inputs.media.MediaCorpus` the driver has read), which
    the workers receive decoded.
    Equals :func:`backend.engine.extraction.extract` on the same corpus and settings: statistics to float64
    rounding, the token sample exactly. ``batch_delay_s`` is for fault-injection tests only.

    A Hub id not in the cache is downloaded here, on the driver, before Ray starts
    (:func:`backend.engine.load.hub.fetch`, reporting bytes to ``download_progress``, under
    ``spec.quota_bytes``): the planning reads its tokenizer, and workers that share the
    driver's Hugging Face cache find it there instead of each fetching it.
    """
    from backend.engine.extraction import ExtractionSettings
    from backend.engine.load import hub

    if (remote := hub.to_download(spec.source)) is not None:
        hub.fetch(
            remote,
            allow_pickle=spec.allow_pickle,
            progress=download_progress,
            quota_bytes=spec.quota_bytes,
        )

    settings = settings or ExtractionSettings()
    options = options or RayOptions()
    started = time.perf_counter()
    with ray_session(options) as ray:
        if not isinstance(corpus, Corpus) and not is_media_corpus(corpus):
            corpus = read_corpus(ray, corpus)
        workers = pool_size(ray, options)
        plan = plan_chunks(spec, corpus, settings, workers)
        partial = _run_pool(
            ray, spec, corpus, settings, options, workers, plan, progress, batch_delay_s
        )
        if not sample_is_complete(partial, plan.threshold):
            # the driver's tokenization disagreed with the workers' (it never should): rerun
            # keeping every candidate rather than return a different sample
            plan = dataclasses.replace(plan, threshold=None)
            partial = _run_pool(
                ray, spec, corpus, settings, options, workers, plan, progress, batch_delay_s
            )
    from backend.engine.extraction import finish

    partial.notices[:0] = [n for n in plan.notes if n not in partial.notices]  # as extract() does
    result = finish(partial, corpus, seconds=time.perf_counter() - started)
    extra = dict(result.extra)
    extra["engine"] = {
        "name": "ray",
        "workers": workers,
        "gpus_per_worker": options.gpus_per_worker,
        "address": options.address or "connected",
    }
    return dataclasses.replace(result, extra=extra)


def _run_pool(
    ray: Any,
    spec: ModelSpec,
    corpus: Corpus,
    settings: Any,
    options: RayOptions,
    workers: int,
    plan: Plan,
    progress: Progress | None,
    batch_delay_s: float,
) -> Any:
    ds = work_dataset(ray, corpus, plan)
    remote: dict[str, Any] = {"num_cpus": options.cpus_per_worker}
    if options.gpus_per_worker > 0:
        remote["num_gpus"] = options.gpus_per_worker
    parts = ds.map_batches(
        ExtractWorker,
        batch_size=1,  # one chunk (a run of whole local batches) per call
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=workers),
        fn_constructor_args=(
            spec,
            settings,
            plan.threshold,
            max(1, int(options.cpus_per_worker)),
            batch_delay_s,
        ),
        **remote,
    )
    merged = None
    done = 0
    if progress is not None:
        progress(0, len(corpus))
    try:
        for batch in parts.iter_batches(batch_size=None, batch_format="numpy"):
            for part in batch["partial"]:
                merged = part if merged is None else merged.merge(part)
                done += len(part.text_ids)
                if progress is not None:
                    progress(done, len(corpus))
    except IsoscopeError:
        raise
    except Exception as exc:
        cause = _isoscope_cause(exc)
        if cause is not None:
            raise RayEngineError(f"a Ray worker failed: {cause}") from None
        raise
    if merged is None:
        raise RayEngineError("the Ray workers returned nothing; check the cluster's logs")
    return merged
