"""A real training trajectory: a tiny BERT-MLM and a tiny GPT-2 (2 layers, width 32) trained for
300 steps on the bundled corpus with a plain torch loop, saved as checkpoint-0/100/200/300
(safetensors + tokenizer), then analysed by isoscope.analysis.compare.trajectory and ``isoscope trajectory``.
Also: adding a checkpoint computes only that one, and bad input (no checkpoints, mixed
architectures, a damaged checkpoint) gets a clear message while the finished work is kept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from isoscope.analysis.compare.trajectory import (
    find_checkpoints,
    resolve_checkpoints,
    run_trajectory,
)
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionSettings
from isoscope.engine.inputs.corpus import bundled_corpus, corpus_from_text
from isoscope.engine.store.cache import ResultCache
from tests.clirun import run_backend

ROOT = Path(__file__).resolve().parents[4]
STEPS = (0, 100, 200, 300)
SETTINGS = ExtractionSettings(max_length=32, sample_size=2000)


def _tokenizer():
    """A 1,000-piece WordPiece vocabulary trained on the bundled corpus (a small vocabulary keeps
    the output layer, and so each training step, cheap)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(
        list(bundled_corpus().texts), vocab_size=1000, min_frequency=1, show_progress=False
    )
    return BertTokenizerFast(
        tokenizer_object=wordpiece._tokenizer,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )


def _train(kind: str, tokenizer, root: Path) -> Path:
    """Train a 2-layer, width-32 model for 300 steps (AdamW, lr 3e-3, batches of 16 texts of at
    most 32 tokens), saving checkpoint-STEP/ at every step in STEPS."""
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    if kind == "bert":
        model = BertForMaskedLM(
            BertConfig(
                vocab_size=len(tokenizer),
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=128,
                max_position_embeddings=64,
            )
        )
    else:
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=len(tokenizer),
                n_embd=32,
                n_layer=2,
                n_head=2,
                n_positions=64,
                bos_token_id=tokenizer.cls_token_id,
                eos_token_id=tokenizer.sep_token_id,
            )
        )
    enc = tokenizer(
        list(bundled_corpus().texts),
        truncation=True,
        max_length=32,
        padding="max_length",
        return_tensors="pt",
    )
    ids, mask = enc["input_ids"], enc["attention_mask"]
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    folder = root / kind

    def save(step: int) -> None:
        model.save_pretrained(folder / f"checkpoint-{step}")  # safetensors
        tokenizer.save_pretrained(folder / f"checkpoint-{step}")

    save(0)
    model.train()
    for step in range(1, STEPS[-1] + 1):
        rows = torch.randint(0, len(ids), (16,), generator=generator)
        x, m = ids[rows].clone(), mask[rows]
        if kind == "bert":  # 15 % of the real tokens masked, loss on those only
            special = (x == tokenizer.cls_token_id) | (x == tokenizer.sep_token_id) | (m == 0)
            chosen = (torch.rand(x.shape, generator=generator) < 0.15) & ~special
            labels = torch.where(chosen, x, torch.full_like(x, -100))
            x[chosen] = tokenizer.mask_token_id
        else:  # next-token prediction
            labels = torch.where(m.bool(), x, torch.full_like(x, -100))
        loss = model(input_ids=x, attention_mask=m, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in STEPS:
            save(step)
    return folder


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory) -> dict[str, Path]:
    """{"bert": folder, "gpt2": folder}, each holding checkpoint-0/100/200/300."""
    root = tmp_path_factory.mktemp("runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tokenizer = _tokenizer()
        return {kind: _train(kind, tokenizer, root) for kind in ("bert", "gpt2")}
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def corpus():
    return corpus_from_text("\n".join(bundled_corpus().texts[:120]), name="bundled, first 120")


def test_checkpoints_are_found_and_sorted_by_step(trained_runs, tmp_path):
    found = find_checkpoints(trained_runs["bert"])
    assert [c.step for c in found] == list(STEPS)
    assert [c.name for c in found] == [f"checkpoint-{s}" for s in STEPS]
    # step* names and an explicit list in the wrong order are sorted too
    for step in (20, 3):
        shutil.copytree(trained_runs["bert"] / "checkpoint-0", tmp_path / f"step{step}")
    assert [c.step for c in find_checkpoints(tmp_path)] == [3, 20]
    listed = resolve_checkpoints([tmp_path / "step20", tmp_path / "step3"])
    assert [c.step for c in listed] == [3, 20]


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_trajectory_of_a_real_training_run(trained_runs, corpus, tmp_path, kind):
    checkpoints = find_checkpoints(trained_runs[kind])
    t = run_trajectory(
        checkpoints, corpus, SETTINGS, device="cpu", cache=ResultCache(tmp_path / "cache")
    )
    assert t.complete and t.errors == []
    assert t.steps == list(STEPS)
    assert all(len(p.states) == 3 for p in t.points)  # emb, 1, 2
    assert {p.model["model_type"] for p in t.points} == {"bert" if kind == "bert" else "gpt2"}
    aniso = t.series("anisotropy")
    assert aniso.shape == (4, 3) and np.isfinite(aniso).all()
    assert not np.allclose(aniso[0], aniso[-1], atol=1e-3)  # training moved the geometry
    largest = t.series("max_abs_mean")
    assert not np.allclose(largest[0], largest[-1])
    # random init: every LayerNorm has gamma = 1 (no spread, nothing flagged); training moves them
    assert all(dims == [] for dims in t.points[0].ln_gamma_flags.values())
    assert t.points[0].ln_outlier_dims == []
    for row in t.emergence():
        assert row["first_step"] in STEPS and row["first_step"] <= row["last_step"]


def test_adding_a_checkpoint_computes_only_that_one(trained_runs, corpus, tmp_path, monkeypatch):
    import isoscope.engine.extraction

    cache = ResultCache(tmp_path / "cache")
    all_four = find_checkpoints(trained_runs["bert"])
    first = run_trajectory(all_four[:3], corpus, SETTINGS, device="cpu", cache=cache)
    assert first.steps == [0, 100, 200]
    calls = []
    real = isoscope.engine.extraction.extract
    monkeypatch.setattr(
        isoscope.engine.extraction,
        "extract",
        lambda *a, **k: calls.append(a[0].info.source) or real(*a, **k),
    )
    again = run_trajectory(all_four, corpus, SETTINGS, device="cpu", cache=cache)
    assert again.steps == list(STEPS)
    assert len(calls) == 1 and calls[0].endswith("checkpoint-300")
    assert [p.cached for p in again.points] == [True, True, True, False]
    assert again.points[0].states == first.points[0].states


def test_folder_without_checkpoints(tmp_path):
    (tmp_path / "logs").mkdir()
    with pytest.raises(InputError, match="holds no checkpoint folders"):
        find_checkpoints(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        resolve_checkpoints(tmp_path / "missing")


def test_mixed_architectures_and_a_damaged_checkpoint_keep_the_rest(trained_runs, corpus, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(trained_runs["bert"] / "checkpoint-100", mixed / "checkpoint-100")
    shutil.copytree(trained_runs["gpt2"] / "checkpoint-200", mixed / "checkpoint-200")
    shutil.copytree(trained_runs["bert"] / "checkpoint-300", mixed / "checkpoint-300")
    shutil.copytree(trained_runs["bert"] / "checkpoint-0", mixed / "checkpoint-400")
    (mixed / "checkpoint-400" / "model.safetensors").write_bytes(b"\x00" * 64)
    t = run_trajectory(
        find_checkpoints(mixed), corpus, SETTINGS, device="cpu", cache=ResultCache(tmp_path / "c")
    )
    assert t.steps == [100, 300]
    assert not t.complete and len(t.errors) == 2
    assert "checkpoint-200" in t.errors[0] and "another architecture" in t.errors[0]
    assert "checkpoint-400" in t.errors[1] and "failed to load" in t.errors[1]


# ----------------------------------------------------------------------------- the CLI


def _cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_backend("trajectory", *args, cache_dir=cache_dir)


@pytest.fixture(scope="session")
def texts_file(tmp_path_factory, corpus) -> Path:
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text("\n".join(corpus.texts) + "\n")
    return path


def test_cli_writes_the_trajectory(trained_runs, texts_file, tmp_path):
    out = tmp_path / "traj.json"
    proc = _cli(
        "--checkpoints",
        str(trained_runs["gpt2"]),
        "--texts",
        str(texts_file),
        "--out",
        str(out),
        "--max-length",
        "32",
        "--device",
        "cpu",
        cache_dir=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["steps"] == list(STEPS)
    assert [Path(p).name for p in data["checkpoints"]] == [f"checkpoint-{s}" for s in STEPS]
    assert len(data["states"]) == 4 and all(len(per) == 3 for per in data["states"])
    row = data["states"][-1][2]
    assert set(row) >= {"index", "name", "max_abs_mean", "outlier_dims", "anisotropy"}
    assert row["index"] == 2 and row["name"] == "2"
    assert data["complete"] is True and data["errors"] == []
    assert len(data["layernorm"]) == 4


def test_cli_bad_input(trained_runs, texts_file, tmp_path):
    out = tmp_path / "traj.json"
    proc = _cli(
        "--checkpoints", str(tmp_path), "--texts", str(texts_file), "--out", str(out),
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "holds no checkpoint folders" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()

    bad = tmp_path / "bad"
    shutil.copytree(trained_runs["bert"] / "checkpoint-100", bad / "checkpoint-100")
    shutil.copytree(trained_runs["bert"] / "checkpoint-200", bad / "checkpoint-200")
    (bad / "checkpoint-200" / "config.json").write_text("{not json")
    proc = _cli(
        "--checkpoints", str(bad), "--texts", str(texts_file), "--out", str(out),
        "--max-length", "32", "--device", "cpu", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: checkpoint-200") and "failed to load" in last
    assert "holds the 1 checkpoint(s) that worked" in last and "Traceback" not in proc.stderr
    data = json.loads(out.read_text())
    assert data["steps"] == [100] and data["complete"] is False and len(data["errors"]) == 1
