"""Exports other tools open: the token sample or the mean-pooled texts at one hidden state, raw or
with outlier dims clipped, for the TensorBoard Embedding Projector and Apple's embedding-atlas.

- **Embedding Projector** (https://projector.tensorflow.org, or TensorBoard's projector plugin):
  ``tensors.tsv`` (no header, one row per point, one tab-separated column per dimension),
  ``metadata.tsv`` (a header row, then one row per point: token, text, position, state, special,
  punctuation) and ``projector_config.json`` pointing to both (load it with "Load" or host the folder).
- **embedding-atlas** (``pip install embedding-atlas``; Ren et al. 2025, arXiv 2505.06386): one Parquet
  table with text, token, the chosen 2-D projection's ``x`` and ``y``, the ``vector`` (list of
  float32) and the same metadata. Open it with
  ``embedding-atlas points.parquet --text text --x x --y y``.

Points: ``"token"`` = the extraction's seeded token sample (text = the token in its context,
±8 tokens, the token in brackets); ``"text"`` = one mean-pooled vector per text
(:func:`isoscope.engine.extraction.mean_pooled`; token and position are empty). Clipping
(:class:`~isoscope.analysis.projections.postprocess.ClipDims`): ``"auto"`` zeroes the hidden
state's detected outlier dims
(:func:`isoscope.analysis.outliers.outlier_dims`, what the Clipping & projections page pre-fills), ``"none"``
keeps the raw vectors, a list zeroes those dims. Tabs and newlines inside texts become spaces so
every TSV row stays one row.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isoscope.engine.budget.progress import Progress
from isoscope.engine.errors import InputError
from isoscope.engine.jsonio import strict_json

EXPORT_FORMATS = ("projector", "atlas")
POINT_KINDS = ("token", "text")
METADATA_COLUMNS = ("token", "text", "position", "state", "special", "punctuation")
TEXT_LIMIT = 500  # characters of a text kept in the metadata
PROJECTOR_FILES = ("tensors.tsv", "metadata.tsv", "projector_config.json")
ATLAS_FILE = "points.parquet"


@dataclass(frozen=True)
class ExportPoints:
    """The exported points: ``vectors`` float32 (n, d) and per-point metadata (n,) arrays.

    ``position`` is -1 and ``token`` empty for mean-pooled texts.
    """

    vectors: np.ndarray
    token: np.ndarray
    text: np.ndarray
    position: np.ndarray
    special: np.ndarray
    punctuation: np.ndarray
    state: str
    points: str
    clip_dims: tuple[int, ...]
    model: str

    def __len__(self) -> int:
        return len(self.vectors)

    def metadata_frame(self):
        import pandas as pd

        return pd.DataFrame(
            {
                "token": self.token,
                "text": self.text,
                "position": self.position,
                "state": self.state,
                "special": self.special,
                "punctuation": self.punctuation,
            },
            columns=list(METADATA_COLUMNS),
        )

    @property
    def description(self) -> str:
        clip = f"dims {', '.join(map(str, self.clip_dims))} zeroed" if self.clip_dims else "raw"
        kind = "token sample" if self.points == "token" else "mean-pooled texts"
        return f"{self.model} · state {self.state} · {kind} · {clip} · {len(self):,} points"


def check_points(points: str) -> str:
    key = str(points).strip().lower()
    if key not in POINT_KINDS:
        raise InputError(f"unknown points {points!r}; choose one of: {', '.join(POINT_KINDS)}")
    return key


def check_format(fmt: str) -> str:
    key = str(fmt).strip().lower()
    if key not in EXPORT_FORMATS:
        raise InputError(
            f"unknown export format {fmt!r}; choose one of: {', '.join(EXPORT_FORMATS)}"
        )
    return key


def resolve_clip(clip: str | Sequence[int], result, state: int) -> list[int]:
    """``"auto"`` -> the state's outlier dims (:func:`~isoscope.analysis.outliers.auto_clip_dims`),
    ``"none"`` -> [], ``"D1,D2"`` or ints -> those dims."""
    from isoscope.analysis.outliers import auto_clip_dims
    from isoscope.analysis.projections.postprocess import parse_dims

    if isinstance(clip, str):
        text = clip.strip().lower()
        if text == "auto":
            return sorted(auto_clip_dims(result)[state])
        if text == "none":
            return []
        dims = parse_dims(text, result.hidden_size)
        if not dims:
            raise InputError("--clip needs 'auto', 'none' or dimension indices such as 223,338")
        return dims
    return parse_dims(list(clip), result.hidden_size)


def _clean(values) -> np.ndarray:
    """Strings without tabs or line breaks (one TSV cell each)."""
    out = [" ".join(str(v).split()) for v in values]
    return np.array(out, dtype=object)


def export_points(
    result,
    state: int,
    *,
    points: str = "token",
    clip: str | Sequence[int] = "none",
    loaded=None,
    pooled: np.ndarray | None = None,
    text_ids: Sequence[int] | None = None,
    rows: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> ExportPoints:
    """The points to export at hidden state ``state`` (0 = emb) of an ExtractionResult.

    Mean-pooled texts need ``loaded`` (to pool every text) or ``pooled`` (S, n, d) already computed
    for the texts ``text_ids`` (default: the first n texts). ``rows`` keeps only those points (rows
    of the token sample, or of ``pooled``), e.g. the ones a page projected.
    """
    from isoscope.analysis.projections.methods import hover_contexts, text_snippets
    from isoscope.analysis.projections.postprocess import make_postprocessor

    points = check_points(points)
    if not 0 <= state < result.num_states:
        raise InputError(
            f"hidden state {state} does not exist; this model has states 0 (emb) to {result.num_states - 1}"
        )
    dims = resolve_clip(clip, result, state)
    name = result.state_names[state]
    if points == "token":
        vectors = np.asarray(result.sample_vectors[state], dtype=np.float64)
        sample = result.sample_tokens
        token = _clean(sample.token)
        text = _clean(hover_contexts(result.tokens, result.sample_index))
        position = np.asarray(sample.position, dtype=np.int64)
        special = np.asarray(sample.is_special, dtype=bool)
        punctuation = np.asarray(sample.is_punct, dtype=bool)
    else:
        if pooled is None:
            if loaded is None:
                raise InputError("exporting mean-pooled texts needs the model to pool them")
            from isoscope.engine.extraction import mean_pooled

            pooled = mean_pooled(
                loaded,
                result.texts,
                result.settings.max_length,
                result.settings.batch_size,
                progress,
            )
        vectors = np.asarray(pooled[state], dtype=np.float64)
        n = len(vectors)
        ids = np.arange(n) if text_ids is None else np.asarray(text_ids, dtype=np.int64)
        token = np.full(n, "", dtype=object)
        text = _clean(text_snippets([result.texts[i] for i in ids], TEXT_LIMIT))
        position = np.full(n, -1, dtype=np.int64)
        special = np.zeros(n, dtype=bool)
        punctuation = np.zeros(n, dtype=bool)
    if rows is not None:
        keep = np.asarray(rows, dtype=np.int64)
        vectors, token, text = vectors[keep], token[keep], text[keep]
        position, special, punctuation = position[keep], special[keep], punctuation[keep]
    if dims:
        vectors = make_postprocessor("clip", dims=dims).fit_transform(vectors)
    return ExportPoints(
        vectors=np.asarray(vectors, dtype=np.float32),
        token=token,
        text=text,
        position=position,
        special=special,
        punctuation=punctuation,
        state=name,
        points=points,
        clip_dims=tuple(dims),
        model=str(result.model.get("display_name") or result.model.get("source")),
    )


# ----------------------------------------------------------------------------- projector


def projector_files(exported: ExportPoints) -> dict[str, bytes]:
    """The three Embedding Projector files as bytes: tensors.tsv, metadata.tsv, projector_config.json."""
    tensors = io.StringIO()
    np.savetxt(tensors, exported.vectors, delimiter="\t", fmt="%.7g")
    # Written by hand: the projector splits on tabs and knows no quoting (csv would quote '"').
    frame = exported.metadata_frame()
    lines = ["\t".join(METADATA_COLUMNS)]
    lines += ["\t".join(map(str, row)) for row in frame.itertuples(index=False)]
    metadata = "\n".join(lines) + "\n"
    config = {
        "embeddings": [
            {
                "tensorName": exported.description,
                "tensorShape": [len(exported), int(exported.vectors.shape[1])],
                "tensorPath": "tensors.tsv",
                "metadataPath": "metadata.tsv",
            }
        ]
    }
    return {
        "tensors.tsv": tensors.getvalue().encode("utf-8"),
        "metadata.tsv": metadata.encode("utf-8"),
        "projector_config.json": (strict_json(config, indent=1) + "\n").encode("utf-8"),
    }


def projector_zip(exported: ExportPoints) -> bytes:
    """The three projector files in one zip (the app's download)."""
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in projector_files(exported).items():
            archive.writestr(name, data)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- embedding-atlas


def atlas_table(
    exported: ExportPoints, projection: str = "pca", seed: int = 0, coords: np.ndarray | None = None
):
    """A pyarrow Table for embedding-atlas: text, token, x, y, vector (list<float32>) + metadata.

    ``x``/``y`` are the 2-D ``projection`` (pca | umap | tsne, :func:`isoscope.analysis.projections.methods.project`)
    of the exported vectors, seeded; or ``coords`` (n, 2) already computed (the page's projection).
    """
    import pyarrow as pa

    from isoscope.analysis.projections.methods import project

    if coords is None:
        if len(exported) < 3:
            raise InputError(
                f"{len(exported)} point(s) are too few to project; give more texts or tokens"
            )
        coords = project(exported.vectors, projection, seed).coords
    coords = np.asarray(coords, dtype=np.float64)
    if coords.shape != (len(exported), 2):
        raise InputError(f"coordinates of shape {coords.shape} do not match {len(exported)} points")
    d = int(exported.vectors.shape[1])
    flat = pa.array(np.ascontiguousarray(exported.vectors, dtype=np.float32).ravel())
    vector = pa.FixedSizeListArray.from_arrays(flat, d).cast(pa.list_(pa.float32()))
    return pa.table(
        {
            "text": pa.array(exported.text.tolist(), pa.string()),
            "token": pa.array(exported.token.tolist(), pa.string()),
            "x": pa.array(coords[:, 0], pa.float64()),
            "y": pa.array(coords[:, 1], pa.float64()),
            "vector": vector,
            "position": pa.array(exported.position, pa.int64()),
            "state": pa.array([exported.state] * len(exported), pa.string()),
            "special": pa.array(exported.special, pa.bool_()),
            "punctuation": pa.array(exported.punctuation, pa.bool_()),
        },
        metadata={
            "isoscope": strict_json(
                {
                    "description": exported.description,
                    "projection": projection,
                    "seed": seed,
                    "clip_dims": list(exported.clip_dims),
                }
            )
        },
    )


def atlas_bytes(
    exported: ExportPoints, projection: str = "pca", seed: int = 0, coords: np.ndarray | None = None
) -> bytes:
    """The embedding-atlas Parquet file as bytes (the app's download)."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(atlas_table(exported, projection, seed, coords), buffer)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- writing


def write_export(
    exported: ExportPoints, out_dir: str | Path, fmt: str, projection: str = "pca", seed: int = 0
) -> list[Path]:
    """Write the files of ``fmt`` into ``out_dir`` (created if missing); returns their paths."""
    fmt = check_format(fmt)
    folder = Path(out_dir)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out {str(folder)!r} is a file; give a folder for the exported files")
    if not folder.parent.exists():
        raise InputError(f"--out: folder {str(folder.parent)!r} does not exist")
    folder.mkdir(exist_ok=True)
    files = (
        projector_files(exported)
        if fmt == "projector"
        else {ATLAS_FILE: atlas_bytes(exported, projection, seed)}
    )
    written = []
    for name, data in files.items():
        path = folder / name
        path.write_bytes(data)
        written.append(path)
    return written


# ----------------------------------------------------------------------------- every token

PROJECTOR_MAX_POINTS = 100_000  # the Embedding Projector loads at most this many points


def _corpus_chunks(spilled, result, dims: Sequence[int], chunk_rows: int):
    """(rows, float32 vectors with ``dims`` zeroed, token, context text) per chunk of a spilled
    state (:class:`isoscope.engine.extraction.spill.SpilledState`, rows = ``result.tokens``)."""
    from isoscope.analysis.projections.methods import hover_contexts

    for start, block in spilled.chunks(chunk_rows):
        rows = np.arange(start, start + len(block))
        vectors = np.array(block, dtype=np.float32)
        if dims:
            vectors[:, list(dims)] = 0.0
        yield (
            rows,
            vectors,
            _clean(result.tokens.token[rows]),
            _clean(hover_contexts(result.tokens, rows)),
        )


def atlas_corpus_file(
    spilled,
    result,
    before,
    after,
    path: str | Path,
    clip_dims: Sequence[int] = (),
    *,
    chunk_rows: int = 32_768,
    progress: Progress | None = None,
) -> Path:
    """Every token of a spilled state as embedding-atlas Parquet, written one row group per chunk
    (bounded memory): the columns of :func:`atlas_table`, with ``x``/``y`` the post-processed
    projection ``after`` and ``x_raw``/``y_raw`` the raw one ``before`` (Projections of every row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from isoscope.engine.budget.progress import report

    tokens, d = result.tokens, spilled.dim
    name = result.state_names[spilled.state]
    writer = None
    try:
        for rows, vectors, token, text in _corpus_chunks(spilled, result, clip_dims, chunk_rows):
            flat = pa.array(vectors.ravel())
            table = pa.table(
                {
                    "text": pa.array(text.tolist(), pa.string()),
                    "token": pa.array(token.tolist(), pa.string()),
                    "x": pa.array(after.coords[rows, 0], pa.float64()),
                    "y": pa.array(after.coords[rows, 1], pa.float64()),
                    "x_raw": pa.array(before.coords[rows, 0], pa.float64()),
                    "y_raw": pa.array(before.coords[rows, 1], pa.float64()),
                    "vector": pa.FixedSizeListArray.from_arrays(flat, d).cast(
                        pa.list_(pa.float32())
                    ),
                    "text_id": pa.array(tokens.text_id[rows], pa.int64()),
                    "position": pa.array(tokens.position[rows], pa.int64()),
                    "state": pa.array([name] * len(rows), pa.string()),
                    "special": pa.array(tokens.is_special[rows], pa.bool_()),
                    "punctuation": pa.array(tokens.is_punct[rows], pa.bool_()),
                }
            )
            if writer is None:
                meta = {"projection": after.how, "clip_dims": list(clip_dims), "state": name}
                schema = table.schema.with_metadata({"isoscope": strict_json(meta)})
                writer = pq.ParquetWriter(str(path), schema)
            writer.write_table(table.cast(writer.schema))
            report(progress, int(rows[-1]) + 1, spilled.rows)
    finally:
        if writer is not None:
            writer.close()
    return Path(path)


def projector_corpus_files(
    spilled,
    result,
    out_dir: str | Path,
    clip_dims: Sequence[int] = (),
    *,
    limit: int = PROJECTOR_MAX_POINTS,
    seed: int = 0,
    chunk_rows: int = 32_768,
) -> tuple[list[Path], str | None]:
    """tensors.tsv, metadata.tsv and projector_config.json of every token of a spilled state,
    streamed to ``out_dir``; above ``limit`` (the Projector's 100,000-point cap) a seeded sample
    of ``limit`` rows. Returns the files and a notice when the cap applied."""
    from isoscope.analysis.projections.methods import projection_sample

    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    keep = np.zeros(spilled.rows, dtype=bool)
    keep[projection_sample(spilled.rows, limit, seed)] = True
    tokens, name = result.tokens, result.state_names[spilled.state]
    written = int(keep.sum())
    with (folder / "tensors.tsv").open("w") as tensors, (folder / "metadata.tsv").open("w") as meta:
        meta.write("\t".join(METADATA_COLUMNS) + "\n")
        for rows, vectors, token, text in _corpus_chunks(spilled, result, clip_dims, chunk_rows):
            mine = keep[rows]
            np.savetxt(tensors, vectors[mine], delimiter="\t", fmt="%.7g")
            for r, tok, txt in zip(rows[mine], token[mine], text[mine], strict=True):
                meta.write(
                    f"{tok}\t{txt}\t{tokens.position[r]}\t{name}\t"
                    f"{bool(tokens.is_special[r])}\t{bool(tokens.is_punct[r])}\n"
                )
    notice = None
    if written < spilled.rows:
        notice = (
            f"the Embedding Projector loads at most {PROJECTOR_MAX_POINTS:,} points: a seeded "
            f"sample of {written:,} of {spilled.rows:,} tokens is exported"
        )
    clip = f"dims {', '.join(map(str, clip_dims))} zeroed" if clip_dims else "raw"
    config = {
        "embeddings": [
            {
                "tensorName": f"state {name} · every token · {clip} · {written:,} points",
                "tensorShape": [written, spilled.dim],
                "tensorPath": "tensors.tsv",
                "metadataPath": "metadata.tsv",
            }
        ]
    }
    (folder / "projector_config.json").write_text(strict_json(config, indent=1) + "\n")
    return [folder / f for f in PROJECTOR_FILES], notice


def export_every_token(
    loaded,
    result,
    state: int,
    out_dir: str | Path,
    fmt: str,
    clip: str | Sequence[int] = "none",
    projection: str = "pca",
    seed: int = 0,
    *,
    progress: Progress | None = None,
) -> tuple[list[Path], list[str]]:
    """Every token of ``state`` (a second pass over the corpus, spilled beside the output and
    removed afterwards) as embedding-atlas Parquet (x/y: ``projection`` of the clipped vectors,
    x_raw/y_raw of the raw ones; UMAP / t-SNE fitted on landmarks) or Projector TSV (capped at
    :data:`PROJECTOR_MAX_POINTS`). Returns the files written and notices."""
    from isoscope.analysis.projections.all_tokens import corpus_before_after
    from isoscope.engine.extraction.spill import spill_state

    fmt = check_format(fmt)
    dims = resolve_clip(clip, result, state)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    spill_file = folder / f".isoscope-state{state}.f32"
    try:
        spilled = spill_state(loaded, result, state, spill_file, progress=progress)
        if fmt == "projector":
            files, notice = projector_corpus_files(spilled, result, folder, dims, seed=seed)
            return files, [notice] if notice else []
        post: tuple[str, dict | None] = ("clip", {"dims": dims}) if dims else ("none", None)
        before, after = corpus_before_after(
            spilled, result.sample_vectors[state], projection, *post, seed, progress=progress
        )
        path = atlas_corpus_file(spilled, result, before, after, folder / ATLAS_FILE, dims)
        return [path], [f"x/y: {after.how}"]
    finally:
        spill_file.unlink(missing_ok=True)
