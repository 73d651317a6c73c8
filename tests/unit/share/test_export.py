"""isoscope.share.export on a synthetic extraction: Projector TSVs and the embedding-atlas Parquet read
back with the right row and column counts, schema and values; clipping zeroes the planted dim."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionResult, TokenTable
from isoscope.share.export import (
    METADATA_COLUMNS,
    atlas_bytes,
    export_points,
    projector_files,
    projector_zip,
    resolve_clip,
    write_export,
)
from tests.synthetic import result_from_vectors


def _result(vectors: np.ndarray, text_id: np.ndarray) -> ExtractionResult:
    n = vectors.shape[1]
    tokens = TokenTable(
        text_id=text_id.astype(np.int32),
        position=np.tile(np.arange(10, dtype=np.int32), n // 10),
        # a tab, a quote and a line break inside tokens must not break a TSV row
        token=np.array(['"q"' if i == 3 else ("a\tb" if i == 4 else f"t{i}") for i in range(n)]),
        word_id=np.arange(n, dtype=np.int32),
        is_special=np.arange(n) % 10 == 0,
        is_punct=np.arange(n) % 10 == 9,
    )
    texts = tuple(f"text {i}\nsecond line" for i in range(int(text_id.max()) + 1))
    return result_from_vectors(vectors, tokens, texts=texts)


@pytest.fixture(scope="module")
def planted() -> ExtractionResult:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 200, 12))
    vectors[1, :, 4] += 9.0  # dim 4 is the outlier at state 1
    return _result(vectors, np.repeat(np.arange(20), 10))


def test_clip_modes(planted):
    assert resolve_clip("auto", planted, 1) == [4]
    assert resolve_clip("none", planted, 1) == []
    assert resolve_clip("5, 2", planted, 1) == [2, 5]
    with pytest.raises(InputError, match="out of range"):
        resolve_clip("12", planted, 1)
    with pytest.raises(InputError):
        resolve_clip("abc", planted, 1)


def test_projector_files_read_back(planted):
    exported = export_points(planted, 1, points="token", clip="auto")
    files = projector_files(exported)
    tensors = np.loadtxt(io.StringIO(files["tensors.tsv"].decode()), delimiter="\t")
    assert tensors.shape == (200, 12)  # no header: one row per point, one column per dim
    assert np.all(tensors[:, 4] == 0)  # the outlier dim is clipped
    np.testing.assert_allclose(tensors[:, 0], planted.sample_vectors[1][:, 0], rtol=1e-6)
    lines = files["metadata.tsv"].decode().split("\n")
    assert lines[-1] == ""
    rows = [line.split("\t") for line in lines[:-1]]
    assert rows[0] == list(METADATA_COLUMNS)
    assert len(rows) == 201 and {len(r) for r in rows} == {6}
    assert rows[1][0] == "t0" and rows[1][2] == "0" and rows[1][3] == "1"
    assert rows[1][4] == "True" and rows[10][5] == "True"  # special / punctuation flags
    assert rows[4][0] == '"q"' and rows[5][0] == "a b"  # no quoting, tabs become spaces
    assert "[t0]" in rows[1][1]  # the token in its context
    config = json.loads(files["projector_config.json"])
    (emb,) = config["embeddings"]
    assert emb["tensorPath"] == "tensors.tsv" and emb["metadataPath"] == "metadata.tsv"
    assert emb["tensorShape"] == [200, 12]
    with zipfile.ZipFile(io.BytesIO(projector_zip(exported))) as archive:
        assert sorted(archive.namelist()) == sorted(files)


def test_raw_export_keeps_the_vectors(planted):
    exported = export_points(planted, 1, points="token", clip="none")
    assert exported.clip_dims == ()
    np.testing.assert_array_equal(exported.vectors, planted.sample_vectors[1])


def test_atlas_parquet_schema_and_values(planted, tmp_path):
    exported = export_points(planted, 1, points="token", clip="none")
    table = pq.read_table(io.BytesIO(atlas_bytes(exported, "pca")))
    schema = table.schema
    assert schema.field("text").type == pa.string()
    assert schema.field("token").type == pa.string()
    assert schema.field("x").type == pa.float64() and schema.field("y").type == pa.float64()
    assert schema.field("vector").type == pa.list_(pa.float32())
    assert table.num_rows == 200
    vectors = np.array(table.column("vector").to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(vectors, planted.sample_vectors[1])
    x = np.asarray(table.column("x"))
    # PCA coordinates are centred and spread out
    assert abs(x.mean()) < 1e-6 and x.std() > 0
    meta = json.loads(schema.metadata[b"isoscope"])
    assert meta["projection"] == "pca"
    written = write_export(exported, tmp_path / "atlas", "atlas")
    assert [p.name for p in written] == ["points.parquet"]
    assert pq.read_table(written[0]).num_rows == 200


def test_pooled_texts(planted):
    pooled = np.random.default_rng(1).normal(size=(3, 5, 12))
    exported = export_points(planted, 2, points="text", pooled=pooled, text_ids=[0, 2, 4, 6, 8])
    assert len(exported) == 5
    assert exported.text[1] == "text 2 second line"
    assert list(exported.position) == [-1] * 5 and list(exported.token) == [""] * 5
    with pytest.raises(InputError, match="needs the model"):
        export_points(planted, 2, points="text")


def test_bad_inputs(planted, tmp_path):
    with pytest.raises(InputError, match="hidden state 3 does not exist"):
        export_points(planted, 3)
    with pytest.raises(InputError, match="unknown points"):
        export_points(planted, 0, points="words")
    exported = export_points(planted, 0)
    with pytest.raises(InputError, match="unknown export format"):
        write_export(exported, tmp_path / "x", "csv")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        write_export(exported, tmp_path / "file", "projector")


def test_rows_and_given_coordinates(planted):
    rows = np.array([3, 10, 50, 199])
    exported = export_points(planted, 1, points="token", clip="auto", rows=rows)
    np.testing.assert_array_equal(exported.position, planted.tokens.position[rows])
    assert np.all(exported.vectors[:, 4] == 0)
    coords = np.arange(8, dtype=np.float64).reshape(4, 2)
    table = pq.read_table(io.BytesIO(atlas_bytes(exported, coords=coords)))
    assert np.asarray(table.column("x")).tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(InputError, match="do not match"):
        atlas_bytes(exported, coords=coords[:3])
