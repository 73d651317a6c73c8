"""`isoscope analyze` as a user runs it: JSON contract, and bad inputs exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "texts.txt"
    path.write_text(
        "The bank raised its rates.\nWe sat on the river bank.\n\nA third text, with a comma.\nWhy?\n"
        + " ".join(["long"] * 200)
        + "\n",
        encoding="utf-8",
    )
    return path


def test_analyze_writes_the_json_contract(run_analyze, tiny_bert_dir, texts_file, tmp_path):
    out = tmp_path / "out.json"
    proc = run_analyze(
        "--model",
        str(tiny_bert_dir),
        "--texts",
        str(texts_file),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--max-length",
        "32",
        "--n-pairs",
        "300",
        "--seed",
        "1",
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert "extracting 5 texts" in proc.stderr and "cut to 32 tokens" in proc.stderr
    report = json.loads(out.read_text())
    model = report["model"]
    assert {"source", "architecture", "num_layers", "hidden_size", "device"} <= set(model)
    assert (model["architecture"], model["num_layers"], model["hidden_size"]) == (
        "BertModel",
        2,
        32,
    )
    assert model["device"] == "cpu · float32"
    assert report["corpus"]["num_texts"] == 5
    assert report["corpus"]["num_tokens"] > 5 * 3
    layers = report["layers"]
    assert [layer["index"] for layer in layers] == [0, 1, 2]
    assert [layer["name"] for layer in layers] == ["emb", "1", "2"]
    for layer in layers:
        for key in ("mean", "variance", "argmin_freq", "argmax_freq"):
            assert len(layer[key]) == 32 and all(isinstance(v, float) for v in layer[key]), key
        assert abs(sum(layer["argmin_freq"]) - 1.0) < 1e-9
        assert all(isinstance(j, int) and 0 <= j < 32 for j in layer["outlier_dims"])
        assert -1.0 <= layer["anisotropy"] <= 1.0
    # A second run answers from the disk cache with the same numbers.
    out2 = tmp_path / "out2.json"
    again = run_analyze(
        "--model",
        str(tiny_bert_dir),
        "--texts",
        str(texts_file),
        "--out",
        str(out2),
        "--device",
        "cpu",
        "--max-length",
        "32",
        "--pairs",
        "300",
        "--seed",
        "1",
        cache_dir=tmp_path / "cache",
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(out2.read_text())["layers"] == layers
    # the second run spelled the count the old way: still read, with a note naming --n-pairs
    assert "--pairs is deprecated here, use --n-pairs" in again.stderr


def make_pickle_only(src: Path, dst: Path) -> Path:
    """Copy a checkpoint folder, replacing model.safetensors by a pickle pytorch_model.bin."""
    import shutil

    import torch
    from safetensors.torch import load_file

    dst.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        if path.suffix != ".safetensors":
            shutil.copy(path, dst / path.name)
    torch.save(load_file(src / "model.safetensors"), dst / "pytorch_model.bin")
    return dst


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory, tiny_bert_dir) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("bad")
    good = folder / "good.txt"
    good.write_text("one text\nanother text\n")
    empty = folder / "empty.txt"
    empty.write_text("\n  \n")
    binary = folder / "blob.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    pickled = make_pickle_only(tiny_bert_dir, folder / "pickle-only")
    return {
        "missing file": ["--texts", str(folder / "nope.txt"), "--model", str(tiny_bert_dir)],
        "empty file": ["--texts", str(empty), "--model", str(tiny_bert_dir)],
        "binary file": ["--texts", str(binary), "--model", str(tiny_bert_dir)],
        "unknown model": ["--texts", str(good), "--model", "isoscope-test-org/not-a-cached-model"],
        "unknown random family": ["--texts", str(good), "--model", "random:lstm"],
        "pickle-only folder": ["--texts", str(good), "--model", str(pickled)],
    }


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("missing file", "does not exist"),
        ("empty file", "empty"),
        ("binary file", "binary"),
        ("unknown model", "local Hugging Face cache"),
        ("unknown random family", "unknown random model family"),
        ("pickle-only folder", "pickle"),
    ],
)
def test_bad_input_exits_2_with_one_line(run_analyze, bad_inputs, case, needle, tmp_path):
    out = tmp_path / "out.json"
    proc = run_analyze(
        *bad_inputs[case], "--out", str(out), "--device", "cpu", cache_dir=tmp_path / "cache"
    )
    assert proc.returncode == 2, (case, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert not out.exists()


def test_a_gguf_announces_the_first_page_before_its_conversion(
    texts_file, tmp_path, capsys, monkeypatch
):
    """The `first page:` line of a GGUF comes from its tensor table and its own tokenizer, before
    the (slow) conversion; its parameters and tokens are those of the converted checkpoint."""
    from isoscope.cli import main
    from isoscope.engine.budget import throughput, time_estimate
    from isoscope.engine.budget.batching import Batching, padded_tokens
    from isoscope.engine.budget.estimates import describe_seconds
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.load import gguf, preflight

    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "iso"))  # no earlier conversion
    from tests.gguf_files import build_case

    _, path, _ = build_case("llama", tmp_path)  # a 2-layer random Llama
    parameters = sum(preflight.gguf_census(path).values())
    cache = tmp_path / "results"
    throughput.record(cache, "cpu", parameters, 100, 10.0)  # 0.1 s per token
    stderr_at_conversion = []
    real_convert = gguf.convert_gguf

    def convert(gguf_path, folder):
        stderr_at_conversion.append(capsys.readouterr().err)
        return real_convert(gguf_path, folder)

    monkeypatch.setattr(gguf, "convert_gguf", convert)
    out = tmp_path / "out.json"
    argv = ["analyze", "--model", str(path), "--texts", str(texts_file), "--out", str(out)]
    code = main([*argv, "--device", "cpu", "--max-length", "16", "--cache-dir", str(cache)])
    assert code == 0, capsys.readouterr().err
    (before,) = stderr_at_conversion
    (line,) = [ln for ln in before.splitlines() if ln.startswith("first page:")]
    tokens = int(line.split(" x ")[1].split(" tokens")[0].replace(",", ""))
    model = json.loads(out.read_text())["model"]
    assert f"({model['num_parameters'] / 1e6:,.1f} M parameters x" in line
    converted = time_estimate.folder_tokenizer(gguf.converted_folder(path))
    texts = load_corpus_file(texts_file).texts
    counts = throughput.token_counts(converted, texts, 16)
    assert tokens == sum(counts)
    padded = padded_tokens(counts, Batching.of())  # the batches' tokens
    extraction_s = throughput.extraction_seconds(0.1 / parameters, parameters, padded)
    assert line.startswith("first page: ") and ": conversion about " in line  # not converted yet
    assert f"extraction {describe_seconds(extraction_s)} (" in line
