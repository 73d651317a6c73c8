"""What the Ray engine's driver prepares: the corpus read as a Ray dataset (:func:`read_corpus`,
numbered in sorted path order, so text indices never depend on the workers), the local engine's
batches grouped into chunks (:func:`plan_chunks`, tokenized on the driver without the weights)
and one dataset row per chunk (:func:`work_dataset`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from isoscope.engine.extraction.ray_cluster import ModelSpec, RayEngineError
from isoscope.engine.inputs.corpus import MAX_TEXTS, Corpus, corpus_files, corpus_from_shards

if TYPE_CHECKING:
    from isoscope.engine.extraction.tokenization import TokenizedCorpus
    from isoscope.engine.inputs.media import MediaCorpus


def _parse_shard(row: dict[str, Any]) -> dict[str, Any]:
    """Ray map: one file's bytes -> its raw texts and notices (the local engine's parser)."""
    import json

    from isoscope.engine.inputs.corpus import texts_from_bytes

    raw = bytes(row["bytes"])
    name = Path(str(row["path"])).name
    texts, notices = texts_from_bytes(raw, name) if raw.strip() else ([], [])
    return {"path": str(row["path"]), "texts": json.dumps(texts), "notices": json.dumps(notices)}


def read_corpus(ray_module: Any, path: str | Path, max_texts: int = MAX_TEXTS) -> Corpus:
    """The corpus at ``path`` read as a Ray dataset, numbered in sorted path order.

    Equals :func:`isoscope.engine.inputs.corpus.load_corpus_file` on the same path (same parser, same cleaning,
    same limits), so both engines analyse the same texts under the same indices.
    """
    import json

    from isoscope.engine.inputs.files import check_size

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
    from isoscope.engine.inputs.corpus import TEXT_SUFFIXES

    name = path.name if path.suffix.lower() in TEXT_SUFFIXES else path.name + ".txt"
    return corpus_from_shards(shards, name, max_texts)


def _norm(path: str) -> str:
    return str(Path(path.removeprefix("local://")).resolve())


def is_media_corpus(corpus: Any) -> TypeGuard[MediaCorpus]:
    """Images or clips (:class:`isoscope.engine.inputs.media.MediaCorpus`) rather than texts."""
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
    from isoscope.engine.budget.batching import plan_batches
    from isoscope.engine.extraction import token_priority, tokenize

    notes: tuple[str, ...] = ()
    group = None
    tokenized: TokenizedCorpus
    if is_media_corpus(corpus):
        from isoscope.engine.extraction.media import prepare_media
        from isoscope.engine.load.models import load_model

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
    """What :func:`isoscope.engine.extraction.tokenize` needs of a model (tokenizer, max positions,
    a text layout), read from the checkpoint's tokenizer and config files without loading its
    weights."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoTokenizer

    from isoscope.engine.load import models
    from isoscope.engine.load.source import parse_source

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
            from isoscope.engine.errors import ModelLoadError

            raise ModelLoadError(
                f"cannot read the tokenizer or config of {source!r} on this machine "
                f"({str(exc).splitlines()[0][:200]}); the driver plans the batches with them"
            ) from None
        max_positions = getattr(config, "max_position_embeddings", None)
    # a text corpus is planned here (media corpora load a stand-in model): tokenize's modality
    # check reads a text layout. The plan only needs the texts' lengths; each worker batches its
    # chunk by its own loaded model's padding probe.
    return SimpleNamespace(
        tokenizer=tokenizer,
        info=SimpleNamespace(max_positions=max_positions, display_name=source),
        layout=SimpleNamespace(modality="text", pad_with_mask=True, notes=()),
    )


def work_dataset(ray_module: Any, corpus: Corpus, plan: Plan) -> Any:
    """One row per chunk (``text_ids`` and ``texts`` as JSON), so a Ray task never splits one.
    Images and clips travel decoded, pickled (``items``): the driver read the folder, so the
    workers need no access to it."""
    import json
    import pickle

    rows = [
        {
            "chunk": i,
            "text_ids": json.dumps([int(t) for t in chunk]),
            **(
                {"items": pickle.dumps([corpus.items[int(t)] for t in chunk])}
                if is_media_corpus(corpus)
                else {"texts": json.dumps([corpus.texts[int(t)] for t in chunk])}
            ),
        }
        for i, chunk in enumerate(plan.chunks)
    ]
    return ray_module.data.from_items(rows, override_num_blocks=len(rows))
