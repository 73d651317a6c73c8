"""Every-token exports (issue 35) equal the in-memory exports when the sample holds every token,
and the Projector's 100k cap turns into a named seeded sample."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from isoscope.analysis.projections.all_tokens import corpus_before_after
from isoscope.engine.extraction.spill import spill_state
from isoscope.share.export import (
    atlas_corpus_file,
    export_points,
    projector_corpus_files,
    projector_files,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spilled(tiny_all, tmp_path_factory):
    loaded, result = tiny_all
    return spill_state(loaded, result, 1, tmp_path_factory.mktemp("spill") / "s.f32")


def in_token_order(result, values):
    out = np.empty_like(values)
    out[result.sample_index] = values
    return out


def test_atlas_parquet_of_every_token(tiny_all, spilled, tmp_path):
    _, result = tiny_all
    before, after = corpus_before_after(
        spilled, result.sample_vectors[1], "pca", "clip", {"dims": [3]}
    )
    path = atlas_corpus_file(
        spilled, result, before, after, tmp_path / "p.parquet", [3], chunk_rows=9
    )
    table = pq.read_table(path)
    assert table.num_rows == result.num_tokens
    reference = export_points(result, 1, clip=[3])
    vectors = np.array(table.column("vector").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(vectors, in_token_order(result, reference.vectors), atol=1e-5)
    assert table.column("text").to_pylist() == in_token_order(result, reference.text).tolist()
    np.testing.assert_allclose(table.column("x").to_numpy(), after.coords[:, 0], rtol=1e-6)
    assert b"isoscope" in table.schema.metadata


def test_projector_files_of_every_token_and_the_cap(tiny_all, spilled, tmp_path):
    _, result = tiny_all
    files, notice = projector_corpus_files(spilled, result, tmp_path / "all", chunk_rows=11)
    assert notice is None
    reference = projector_files(export_points(result, 1))
    metadata = (tmp_path / "all" / "metadata.tsv").read_text().splitlines()
    ref_lines = reference["metadata.tsv"].decode().splitlines()
    assert metadata[0] == ref_lines[0]
    assert sorted(metadata[1:]) == sorted(ref_lines[1:])
    tensors = np.loadtxt(files[0], delimiter="\t", dtype=np.float32)
    assert tensors.shape == (result.num_tokens, result.hidden_size)
    capped, notice = projector_corpus_files(spilled, result, tmp_path / "cap", limit=10)
    assert "100,000" in notice and "10 of" in notice
    assert len((tmp_path / "cap" / "metadata.tsv").read_text().splitlines()) == 11
    assert np.loadtxt(capped[0], delimiter="\t").shape == (10, result.hidden_size)
