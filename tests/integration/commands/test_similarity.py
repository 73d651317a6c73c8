"""The ``sts`` CLI and word-sense vectors on real models: JSON shape, auto clip dims, errors, and the
STS-B check (the default model's published test score, 82.03) when the benchmark file is present."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from isoscope.analysis.similarity import top_mean_dims, word_vectors
from isoscope.cli import main
from isoscope.engine.inputs.pairs import STS_SAMPLE, WordSenseRows, read_pairs_csv

ROOT = Path(__file__).resolve().parents[3]
STSB_CANDIDATES = [
    Path("/work/shared/data/stsb/stsb-en-test.csv"),
    ROOT.parent / "shared" / "data" / "stsb" / "stsb-en-test.csv",
]
STSB_TEST = next((p for p in STSB_CANDIDATES if p.is_file()), None)


def run_sts(tmp_path, *args: str) -> dict:
    out = tmp_path / "sts.json"
    assert main(["sts", *args, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_sts_cli_json_shape_and_auto_clip_dims(tmp_path, tiny_bert_dir):
    report = run_sts(
        tmp_path, "--model", str(tiny_bert_dir), "--pairs", str(STS_SAMPLE), "--device", "cpu"
    )
    states = report["states"]
    assert [s["index"] for s in states] == [0, 1, 2]  # emb + 2 layers: index 0 is never dropped
    for s in states:
        assert set(s) >= {"index", "raw", "clipped", "clipped_dims"}
        assert isinstance(s["raw"], float) and -100 <= s["raw"] <= 100
        assert all(0 <= j < 32 for j in s["clipped_dims"])
    assert report["pairs"]["count"] == len(read_pairs_csv(STS_SAMPLE))

    # auto = each state's headline outlier dims, detected on an extraction of the evaluated
    # sentences (what "auto" means on every page and in export), recomputed here
    from isoscope.analysis.outliers import auto_clip_dims
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.load.models import load_model

    pairs = read_pairs_csv(STS_SAMPLE)
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    sentences = tuple(sorted(set(pairs.sentence1) | set(pairs.sentence2)))
    result = extract(loaded, Corpus(sentences, pairs.name), ExtractionSettings())
    assert [s["clipped_dims"] for s in states] == auto_clip_dims(result)


def test_sts_cli_largest_mean_clips_the_two_largest_mean_pooled_dims(tmp_path, tiny_bert_dir):
    """The former meaning of --clip auto, kept under its own name."""
    report = run_sts(
        tmp_path,
        "--model",
        str(tiny_bert_dir),
        "--pairs",
        str(STS_SAMPLE),
        "--clip",
        "largest-mean",
    )
    from isoscope.engine.extraction import mean_pooled
    from isoscope.engine.load.models import load_model

    pairs = read_pairs_csv(STS_SAMPLE)
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    pooled = mean_pooled(loaded, list(pairs.sentence1) + list(pairs.sentence2))
    for s in report["states"]:
        assert s["clipped_dims"] == top_mean_dims(pooled[s["index"]], 2)


def test_sts_cli_fixed_dims_and_none(tmp_path, tiny_bert_dir):
    fixed = run_sts(
        tmp_path, "--model", str(tiny_bert_dir), "--pairs", str(STS_SAMPLE), "--clip", "3,1"
    )
    assert all(s["clipped_dims"] == [1, 3] for s in fixed["states"])
    none = run_sts(
        tmp_path,
        "--model",
        str(tiny_bert_dir),
        "--pairs",
        str(STS_SAMPLE),
        "--clip",
        "none",
        "--postprocess",
        "standardize",
    )
    for s in none["states"]:
        assert s["clipped_dims"] == [] and s["clipped"] == pytest.approx(s["raw"])
        assert "processed" in s


def test_sts_cli_on_the_bundled_model_sample(tmp_path):
    report = run_sts(tmp_path, "--model", "default", "--pairs", str(STS_SAMPLE), "--device", "cpu")
    states = report["states"]
    assert len(states) == 7
    # the sentence-embedding model's final state ranks the sample far better than its embeddings
    assert states[-1]["raw"] > states[0]["raw"] + 15


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pairs", "/no/such.csv"], "does not exist"),
        (["--pairs", str(STS_SAMPLE), "--clip", "x"], "not an integer"),
        (["--pairs", str(STS_SAMPLE), "--postprocess", "magic"], "unknown --postprocess"),
    ],
)
def test_sts_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    assert (
        main(
            [
                "sts",
                "--model",
                "random:bert:layers=1,width=16,heads=2",
                *args,
                "--out",
                str(tmp_path / "o.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]


def test_sts_cli_bad_csv_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence1,sentence2,score\nA.,B.,1\nC.,D.,lots\n")
    assert main(["sts", "--pairs", str(bad), "--out", str(tmp_path / "o.json")]) == 2
    assert "line 3" in capsys.readouterr().err


def test_word_vectors_average_the_word_pieces(minilm):
    rows = WordSenseRows(
        word=("bank", "skateboarding", "zebra"),
        context1=("The bank was closed.", "She loves skateboarding daily.", "A horse."),
        context2=("Two banks merged today.", "Skateboarding is fun.", "A zebra."),
        same_sense=np.array([True, True, False]),
        name="test rows",
    )
    vectors = word_vectors(minilm, rows)
    assert list(vectors.rows) == [0, 1]  # row 3: 'zebra' missing from context 1
    assert (
        len(vectors.problems) == 1
        and "row 3" in vectors.problems[0]
        and "context 1" in vectors.problems[0]
    )
    assert vectors.first.shape == (7, 2, 384)

    from isoscope.engine.extraction import encode_text

    hidden, table = encode_text(minilm, "She loves skateboarding daily.")
    pieces = np.flatnonzero(table.word_id == 2)  # "She"=0 "loves"=1 "skateboarding"=2
    assert len(pieces) >= 2  # the word really is split into pieces (skate ##boarding)
    np.testing.assert_allclose(
        vectors.first[:, 1], hidden[:, pieces].astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-5
    )
    hidden_b, table_b = encode_text(minilm, "Two banks merged today.")
    banks = np.flatnonzero(table_b.word_id == 1)
    np.testing.assert_allclose(
        vectors.second[:, 0],
        hidden_b[:, banks].astype(np.float64).mean(axis=1),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.skipif(
    STSB_TEST is None, reason="STS-B test split not found (../shared/data/stsb/stsb-en-test.csv)"
)
def test_stsb_final_state_matches_the_published_score(tmp_path):
    """all-MiniLM-L6-v2 scores 82.03 on STS-B test (sentence-transformers' model card). The only
    full STS-B test: about 1-2 minutes on 2 CPU cores."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    report = run_sts(
        tmp_path,
        "--model",
        "default",
        "--pairs",
        str(STSB_TEST),
        "--device",
        "cpu",
        "--batch-size",
        "64",
        "--max-length",
        "256",
    )
    assert report["pairs"]["count"] == 1379
    final = report["states"][-1]
    assert final["raw"] == pytest.approx(82.03, abs=0.1)
    assert final["index"] == 6
