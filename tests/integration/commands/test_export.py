"""``isoscope export`` as a user runs it: Projector TSVs and the embedding-atlas Parquet
read back (row and column counts, schema), clipping on the bundled MiniLM, bad inputs exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "assets" / "sample_corpus.txt"
RANDOM_BERT = "random:bert:layers=2,width=32,heads=2"
N_TEXTS = sum(1 for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip())


def run_export(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ISOSCOPE_CACHE_DIR": str(cache_dir),
    }
    return subprocess.run(
        [sys.executable, "-m", "isoscope", "export", "--texts", str(CORPUS), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_projector_export_reads_back(tmp_path):
    out = tmp_path / "projector"
    proc = run_export(
        "--model", RANDOM_BERT, "--state", "emb", "--format", "projector", "--out", str(out),
        "--sample-size", "1000", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    tensors = (out / "tensors.tsv").read_text().splitlines()
    metadata = (out / "metadata.tsv").read_text().splitlines()
    assert len(tensors) == 1000 and {len(line.split("\t")) for line in tensors} == {32}
    float(tensors[0].split("\t")[0])  # no header row: the first line is numbers
    assert metadata[0].split("\t") == [
        "token",
        "text",
        "position",
        "state",
        "special",
        "punctuation",
    ]
    assert len(metadata) == 1001 and {len(line.split("\t")) for line in metadata} == {6}
    assert {line.split("\t")[3] for line in metadata[1:]} == {"emb"}
    config = json.loads((out / "projector_config.json").read_text())
    assert config["embeddings"][0]["tensorPath"] == "tensors.tsv"
    assert config["embeddings"][0]["metadataPath"] == "metadata.tsv"
    assert config["embeddings"][0]["tensorShape"] == [1000, 32]


def test_atlas_export_of_mean_pooled_texts(tmp_path):
    out = tmp_path / "atlas"
    proc = run_export(
        "--model", RANDOM_BERT, "--state", "2", "--format", "atlas", "--points", "text",
        "--out", str(out), cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out / "points.parquet")
    assert table.num_rows == N_TEXTS
    schema = table.schema
    for name, kind in [("text", pa.string()), ("token", pa.string()), ("x", pa.float64()),
                       ("y", pa.float64()), ("vector", pa.list_(pa.float32()))]:  # fmt: skip
        assert schema.field(name).type == kind
    assert {len(v) for v in table.column("vector").to_pylist()} == {32}
    assert table.column("text")[0].as_py() == CORPUS.read_text(encoding="utf-8").splitlines()[0]


def test_clip_auto_zeroes_the_outlier_dims_of_minilm(tmp_path):
    out = tmp_path / "atlas"
    proc = run_export(
        "--model", "default", "--state", "3", "--format", "atlas", "--clip", "auto",
        "--out", str(out), "--sample-size", "2000", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out / "points.parquet")
    vectors = np.array(table.column("vector").to_pylist(), dtype=np.float32)
    assert vectors.shape == (2000, 384)
    meta = json.loads(table.schema.metadata[b"isoscope"])
    assert 223 in meta["clip_dims"]
    assert np.all(vectors[:, meta["clip_dims"]] == 0)
    assert np.abs(vectors).sum(axis=0).astype(bool).sum() == 384 - len(meta["clip_dims"])


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    for args, message in [
        (["--state", "9", "--format", "atlas"], "--state"),
        (["--state", "1", "--format", "csv"], "unknown export format"),
    ]:
        proc = run_export(
            "--model", RANDOM_BERT, *args, "--out", str(tmp_path / "x"), cache_dir=tmp_path / "c"
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stderr
        assert lines[-1].startswith("error:") and message in lines[-1]
        assert "Traceback" not in proc.stderr


def test_every_token_exports_as_atlas_parquet(tmp_path):
    out = tmp_path / "all"
    proc = run_export(
        "--model", RANDOM_BERT, "--state", "1", "--format", "atlas", "--out", str(out),
        "--points", "all", "--clip", "3,5", "--sample-size", "500", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out / "points.parquet")
    assert table.num_rows > 500  # every token, not the 500-token sample
    vectors = np.array(table.column("vector").to_pylist())
    assert vectors.shape[1] == 32 and not vectors[:, [3, 5]].any()
    assert {"x", "y", "x_raw", "y_raw", "text", "token"} <= set(table.column_names)
    assert sorted(p.name for p in out.iterdir()) == ["points.parquet"]  # the spill is removed
    assert "every token" in proc.stderr
