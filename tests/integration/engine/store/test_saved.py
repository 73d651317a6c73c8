"""`analyze --save`: the saved analysis reopens as the very result the CLI computed, in a zip or a
folder, and every figure of the analyze JSON is the same when rebuilt from the file."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from isoscope.commands.analyze import build_report
from isoscope.engine.extraction import ExtractionResult, ExtractionSettings, TokenTable, extract
from isoscope.engine.inputs.corpus import load_corpus_file
from isoscope.engine.load.models import load_model
from isoscope.engine.store.saved import SavedModel, load_saved


def _same(a: ExtractionResult, b: ExtractionResult) -> None:
    for f in dataclasses.fields(ExtractionResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        elif isinstance(x, TokenTable):
            for g in dataclasses.fields(TokenTable):
                np.testing.assert_array_equal(getattr(x, g.name), getattr(y, g.name))
        elif f.name != "seconds":
            assert x == y, f.name


def test_cli_save_zip_and_folder_reopen_as_the_computed_result(
    tmp_path, tiny_bert_dir, run_analyze
):
    texts = tmp_path / "t.txt"
    texts.write_text(
        "The cat sat on the mat.\nA second, longer sentence about outlier dimensions.\n"
        "Short one.\nAnisotropy is the mean cosine of random pairs.\n"
    )
    common = ("--model", str(tiny_bert_dir), "--texts", str(texts), "--sample-size", "20")
    zipped = tmp_path / "run.isoscope"
    proc = run_analyze(
        *common, "--out", str(tmp_path / "a.json"), "--save", str(zipped), cache_dir=tmp_path / "c"
    )
    assert proc.returncode == 0, proc.stderr
    assert f"saved analysis: {zipped}" in proc.stderr
    folder = tmp_path / "run-folder"
    folder.mkdir()
    proc = run_analyze(
        *common, "--out", str(tmp_path / "b.json"), "--save", str(folder), cache_dir=tmp_path / "c"
    )
    assert proc.returncode == 0, proc.stderr
    assert (folder / "manifest.json").exists()

    want = extract(
        load_model(str(tiny_bert_dir), device="cpu"),
        load_corpus_file(texts),
        ExtractionSettings(sample_size=20),
    )
    from_zip, from_folder = load_saved(zipped), load_saved(folder)
    _same(from_zip, want)
    _same(from_folder, want)
    # every figure of the JSON report, rebuilt from the saved file, equals what the CLI wrote
    cli = json.loads((tmp_path / "a.json").read_text())
    rebuilt = json.loads(json.dumps(_jsonable(build_report(from_zip))))
    assert rebuilt["layers"] == cli["layers"]
    assert rebuilt["corpus"] == cli["corpus"]


def test_save_into_a_missing_folder_fails_before_the_model_loads(tmp_path, run_analyze):
    texts = tmp_path / "t.txt"
    texts.write_text("one\n")
    proc = run_analyze(
        *("--model", "/no/such/model", "--texts", str(texts), "--out", str(tmp_path / "o.json")),
        *("--save", str(tmp_path / "missing" / "run.isoscope")),
        cache_dir=tmp_path / "c",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --save: folder {str(tmp_path / 'missing')!r} does not exist; create it first"
    ]


def test_saved_model_stand_in_loads_the_same_checkpoint_lazily(tmp_path, tiny_bert_dir):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    result = extract(loaded, load_corpus_file(_write(tmp_path, "a b c\nd e f\n")))
    calls = []

    def loader():
        calls.append(1)
        return load_model(str(tiny_bert_dir), device="cpu")

    stand_in = SavedModel(result, loader)
    assert stand_in.info.num_layers == 2 and stand_in.fingerprint == loaded.fingerprint
    assert not calls  # card and fingerprint come from the file
    assert type(stand_in.encoder).__name__ == "BertModel" and calls == [1]
    assert stand_in.tokenizer is not None and calls == [1]  # loaded once


def _write(tmp_path, text: str):
    path = tmp_path / "c.txt"
    path.write_text(text)
    return path


def _jsonable(value):
    from isoscope.engine.jsonio import to_jsonable

    return to_jsonable(value)
