"""A careful attacker's and a clumsy user's table against `isoscope analyze`: a checkpoint whose
weight names are not its config's, and a cache entry that is not its key's.

Weights: a wrapper prefix (DDP's ``module.``, Lightning's ``model.``, torch.compile's
``_orig_mod.``) loads right and the JSON card says it was stripped; renamed layers, dropped
weights or a weight of another shape exit 2 with one line before any analysis; ``random:`` says
random. Cache: a valid entry of another model, corpus or setting copied over the file of the
run's key, or an entry whose record was edited, is not served: the run's own result comes back,
the refusal is logged and ``cache --info`` counts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from tests.clirun import THREE_TEXTS, one_line_error, run_backend

WEIGHTS_CASES = {
    # name: (checkpoint fixture, key edit, expected: exit 0 + weights line part, or exit 2 needle)
    "whole checkpoint": ("tiny_bert_dir", None, (0, "trained (all 39 tensors")),
    "DDP module. on BERT": ("tiny_bert_dir", "prefix:module.", (0, "stripped prefix 'module.'")),
    "Lightning model. on GPT-2": (
        "tiny_gpt2_dir",
        "prefix:model.",
        (0, "stripped prefix 'model.'"),
    ),
    "compiled _orig_mod. on Llama": (
        "tiny_llama_dir",
        "prefix:_orig_mod.",
        (0, "stripped prefix '_orig_mod.'"),
    ),
    "DDP of a compiled GPT-2": (
        "tiny_gpt2_dir",
        "prefix:module._orig_mod.",
        (0, "stripped prefix 'module._orig_mod.'"),
    ),
    "blocks.* for encoder.layer.*": (
        "tiny_bert_dir",
        "rename:encoder.layer.>blocks.",
        (2, "32 of 39 weights BertModel expects are not in the checkpoint"),
    ),
    "blocks.* for h.* (GPT-2)": (
        "tiny_gpt2_dir",
        "rename:h.>blocks.",
        (2, "weights GPT2Model expects are not in the checkpoint"),
    ),
    "two weights dropped (Llama)": (
        "tiny_llama_dir",
        "drop:layers.1.mlp.up_proj.weight,layers.0.input_layernorm.weight",
        (2, "2 of "),
    ),
    "a weight of another shape (BERT)": (
        "tiny_bert_dir",
        "shrink:encoder.layer.1.output.dense.weight",
        (2, "have another shape there"),
    ),
    "wrapped and renamed": (
        "tiny_bert_dir",
        "rename:encoder.layer.>blocks.|prefix:module.",
        (2, "after stripping the prefix 'module.'"),
    ),
}


def _edit(tensors: dict, how: str) -> dict:
    for step in how.split("|"):
        kind, _, arg = step.partition(":")
        if kind == "prefix":
            tensors = {arg + k: v for k, v in tensors.items()}
        elif kind == "rename":
            old, new = arg.split(">")
            tensors = {
                (new + k[len(old) :] if k.startswith(old) else k): v for k, v in tensors.items()
            }
        elif kind == "drop":
            tensors = {k: v for k, v in tensors.items() if k not in arg.split(",")}
        elif kind == "shrink":
            tensors[arg] = tensors[arg][..., :5].contiguous()
    return tensors


def _checkpoint(source: Path, how: str | None, out: Path) -> Path:
    if how is None:
        return source
    shutil.copytree(source, out)
    path = out / "model.safetensors"
    save_file(_edit(load_file(path), how), str(path), metadata={"format": "pt"})
    return out


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hostile-texts") / "texts.txt"
    path.write_text(THREE_TEXTS)
    return path


def analyze(model: str, texts: Path, out: Path, cache: Path, *extra: str):
    args = ["--model", model, "--texts", str(texts), "--out", str(out), "--device", "cpu"]
    return run_backend("analyze", *args, "--max-length", "32", *extra, cache_dir=cache)


@pytest.mark.parametrize("case", list(WEIGHTS_CASES))
def test_weights_are_the_checkpoints_or_it_says_so(case, request, texts, tmp_path):
    fixture, how, (code, needle) = WEIGHTS_CASES[case]
    folder = _checkpoint(request.getfixturevalue(fixture), how, tmp_path / "ckpt")
    out = tmp_path / "out.json"
    proc = analyze(str(folder), texts, out, tmp_path / "cache")
    if code == 2:
        one_line_error(proc, needle)
        assert "would read random weights" in proc.stderr
        assert not out.exists()  # refused before any analysis
        return
    assert proc.returncode == 0, proc.stderr
    weights = json.loads(out.read_text())["model"]["weights"]
    assert weights.startswith("trained (all ") and needle in weights, weights


def test_a_random_model_says_random(texts, tmp_path):
    out = tmp_path / "out.json"
    proc = analyze("random:bert:layers=2,width=32,heads=2", texts, out, tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["model"]["weights"].startswith("random init")


def _entry(cache: Path) -> Path:
    (entry,) = cache.glob("*.npz")
    return entry


def _edit_record(entry: Path) -> None:
    """The record of what the entry was computed from, edited to another seed."""
    with np.load(entry, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    record = json.loads(str(arrays["computed_from"]))
    record["settings"]["seed"] += 1
    arrays["computed_from"] = np.array(json.dumps(record))
    with entry.open("wb") as fh:
        np.savez(fh, **arrays)


CACHE_CASES = {
    # name: (the other run's model fixture, its extra arguments, its texts; None: edit the record)
    "another model's entry": ("tiny_gpt2_dir", (), None),
    "another corpus's entry": ("tiny_bert_dir", (), "Winter is cold.\nA dog barked.\n"),
    "another setting's entry": ("tiny_bert_dir", ("--seed", "7"), None),
    "the record edited": (None, (), None),
}


@pytest.mark.parametrize("case", list(CACHE_CASES))
def test_a_foreign_or_edited_cache_entry_is_never_served(
    case, request, tiny_bert_dir, texts, tmp_path
):
    other_fixture, extra, other_texts = CACHE_CASES[case]
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    first = analyze(str(tiny_bert_dir), texts, tmp_path / "first.json", mine)
    assert first.returncode == 0, first.stderr
    own = _entry(mine)
    if other_fixture is None:
        _edit_record(own)
    else:
        corpus = texts
        if other_texts is not None:
            corpus = tmp_path / "other.txt"
            corpus.write_text(other_texts)
        model = str(request.getfixturevalue(other_fixture))
        other = analyze(model, corpus, tmp_path / "other.json", theirs, *extra)
        assert other.returncode == 0, other.stderr
        shutil.copyfile(_entry(theirs), own)  # a valid entry, under the name of this run's key
    again = analyze(str(tiny_bert_dir), texts, tmp_path / "again.json", mine)
    assert again.returncode == 0, again.stderr
    assert "refused and recomputed" in again.stderr
    want = json.loads((tmp_path / "first.json").read_text())
    got = json.loads((tmp_path / "again.json").read_text())
    assert got["model"] == want["model"] and got["corpus"] == want["corpus"]
    assert got["layers"] == want["layers"]
    info = run_backend("cache", "--info", "--out", str(tmp_path / "info.json"), cache_dir=mine)
    assert info.returncode == 0, info.stderr
    assert json.loads((tmp_path / "info.json").read_text())["refused_count"] == 1
    assert (
        "1 entry refused as not the result of its key" in info.stderr
        or "1 entry refused" in info.stderr
    )
