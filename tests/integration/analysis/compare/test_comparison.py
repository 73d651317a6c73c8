"""Comparisons through the real loader and extraction: MiniLM against itself (CKA 1 on the
diagonal) and against its random-init copy (``random-like:default``, well below 1), tokenizers
that differ (text basis), different widths and depths, two corpora, STS by state, and the
``isoscope compare`` CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from isoscope.analysis.compare.comparison import compare, comparison_report
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.corpus import corpus_from_text
from isoscope.engine.inputs.pairs import sts_sample
from isoscope.engine.load.models import load_model
from tests.clirun import run_backend
from tests.comparison_inputs import assert_same_comparison as _assert_same_comparison

ROOT = Path(__file__).resolve().parents[4]
SMALL = ExtractionSettings(max_length=32, sample_size=2000)
REQUIRED_STATE_KEYS = {
    "index",
    "anisotropy_a",
    "anisotropy_b",
    "outliers_a",
    "outliers_b",
    "gained",
    "lost",
}


@pytest.fixture(scope="module")
def small_corpus(bundled):
    return corpus_from_text("\n".join(bundled.texts[:60]), name="bundled, first 60")


@pytest.fixture(scope="module")
def random_minilm_result(bundled):
    loaded = load_model("random-like:default", device="cpu")
    assert loaded.info.source == "random-like:default" and loaded.info.random_init
    return loaded, extract(loaded, bundled, ExtractionSettings(sample_size=4000))


def test_minilm_against_itself(minilm, minilm_result):
    c = compare(minilm_result, minilm_result, loaded_a=minilm, loaded_b=minilm)
    assert c.cka.basis == "tokens" and c.cka.n == 4000
    assert c.cka.matrix.shape == (7, 7)
    assert np.diag(c.cka.matrix) == pytest.approx(np.ones(7), abs=1e-9)
    assert all(row["gained"] == [] and row["lost"] == [] for row in c.states)
    assert np.abs(c.abs_mean_diff).max() == 0.0


def test_minilm_against_its_random_init_copy(minilm, minilm_result, random_minilm_result):
    loaded_r, result_r = random_minilm_result
    c = compare(minilm_result, result_r, loaded_a=minilm, loaded_b=loaded_r)
    assert c.cka.basis == "tokens"  # same tokenizer, same settings: the same sampled tokens
    diag = c.cka.diagonal
    assert diag.max() < 0.6  # well below 1
    assert diag[-1] < diag[1] - 0.1  # and falling with depth
    state3 = c.states[3]
    assert 223 in state3["outliers_a"] and 223 in state3["lost"]  # MiniLM's outlier dim
    assert c.states[3]["anisotropy_a"] != pytest.approx(c.states[3]["anisotropy_b"], abs=0.01)
    assert c.ln is not None and len(c.ln.names) == 13  # emb.ln + 2 per layer
    assert 223 in [j for j, _ in c.ln.moved_dims(3)]  # the final LN zeroes 223 in MiniLM
    report = comparison_report(c)
    assert report["a"]["source"] == "default" and report["b"]["source"] == "random-like:default"


def test_different_tokenizers_use_mean_pooled_texts(tiny_bert_dir, tmp_path, small_corpus):
    from transformers import BertTokenizerFast

    cased = tmp_path / "cased"
    model = load_model(str(tiny_bert_dir), device="cpu").model
    model.save_pretrained(cased)
    BertTokenizerFast.from_pretrained(tiny_bert_dir, do_lower_case=False).save_pretrained(cased)
    a, b = load_model(str(tiny_bert_dir), device="cpu"), load_model(str(cased), device="cpu")
    ra, rb = extract(a, small_corpus, SMALL), extract(b, small_corpus, SMALL)
    c = compare(ra, rb, loaded_a=a, loaded_b=b)
    assert c.cka.basis == "texts" and c.cka.n == 60 and c.cka.debiased
    assert any("tokenize the corpus differently" in n for n in c.notes)
    assert c.cka.matrix.shape == (3, 3) and np.isfinite(c.cka.matrix).all()
    # the same weights on different tokens: similar, not identical
    assert 0.2 < c.cka.matrix[0, 0] < 0.999


def test_different_widths_and_depths(tiny_bert_dir, small_corpus):
    a = load_model(str(tiny_bert_dir), device="cpu")
    b = load_model("random:gpt2:layers=3,width=48,heads=2", device="cpu")
    c = compare(
        extract(a, small_corpus, SMALL), extract(b, small_corpus, SMALL), loaded_a=a, loaded_b=b
    )
    assert c.cka.matrix.shape == (3, 4) and np.isfinite(c.cka.matrix).all()
    assert len(c.states) == 3 and all(row["gained"] is None for row in c.states)
    assert c.abs_mean_diff is None and c.ln is None
    assert any("widths differ" in n for n in c.notes) and any("depths differ" in n for n in c.notes)


def test_one_model_two_corpora(tiny_bert_dir, small_corpus):
    a = load_model(str(tiny_bert_dir), device="cpu")
    other = corpus_from_text("def main():\n    return 0\nSELECT * FROM users;\nx = [1, 2, 3]\n")
    c = compare(extract(a, small_corpus, SMALL), extract(a, other, SMALL), loaded_a=a, loaded_b=a)
    assert c.cka is None and any("CKA is skipped" in n for n in c.notes)
    assert c.abs_mean_diff.shape == (3, 32)
    assert comparison_report(c)["basis"] is None


def test_sts_by_state(tiny_bert_dir, small_corpus):
    a = load_model(str(tiny_bert_dir), device="cpu")
    b = load_model(f"random-like:{tiny_bert_dir}", device="cpu")
    pairs = sts_sample()
    c = compare(
        extract(a, small_corpus, SMALL),
        extract(b, small_corpus, SMALL),
        loaded_a=a,
        loaded_b=b,
        pairs=pairs,
    )
    assert c.sts_a.shape == (3,) and c.sts_b.shape == (3,)
    assert np.isfinite(c.sts_a).all() and np.all(np.abs(c.sts_a) <= 100)
    rows = comparison_report(c)["states"]
    assert rows[0]["sts_a"] == pytest.approx(c.sts_a[0])
    assert c.ln is not None and np.abs(c.ln.d_gamma).max() == 0.0  # both random: gamma = 1


def test_the_cache_key_covers_every_option_with_its_default(tiny_bert_dir, small_corpus, tmp_path):
    """The page and the CLI pass different subsets of compare's options; defaults spelled out or
    left out give one key, any changed option another."""
    from isoscope.analysis.compare.comparison import compare_with_cache, comparison_cache_key
    from isoscope.engine.store.cache import ResultCache

    a = load_model(str(tiny_bert_dir), device="cpu")
    b = load_model(f"random-like:{tiny_bert_dir}", device="cpu")
    ra, rb = extract(a, small_corpus, SMALL), extract(b, small_corpus, SMALL)
    page = comparison_cache_key(
        ra, rb, loaded_a=a, loaded_b=b, pairs=None, debiased=None, label_a="A", label_b="B"
    )
    cli = comparison_cache_key(ra, rb, loaded_a=a, loaded_b=b, debiased=None, seed=0)
    assert page == cli
    changed = [
        {"seed": 1},
        {"debiased": True},
        {"label_a": "base"},
        {"top_k": 5},
        {"pairs": sts_sample()},
        {"loaded_b": a},
    ]
    keys = {comparison_cache_key(ra, rb, **{"loaded_a": a, "loaded_b": b, **c}) for c in changed}
    assert len(keys) == len(changed) and page not in keys
    assert comparison_cache_key(rb, ra, loaded_a=b, loaded_b=a) != page
    with pytest.raises(TypeError):
        comparison_cache_key(ra, rb, no_such_option=1)

    ref = compare_with_cache(ResultCache(tmp_path), ra, rb, loaded_a=a, loaded_b=b)
    assert ResultCache(tmp_path).load_arrays(page) is not None  # stored under the page's key
    _assert_same_comparison(compare_with_cache(None, ra, rb, loaded_a=a, loaded_b=b), ref)


# ----------------------------------------------------------------------------- the CLI


def _cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_backend("compare", *args, cache_dir=cache_dir)


def test_cli_default_against_random_like(tmp_path, small_corpus):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(small_corpus.texts) + "\n")
    out = tmp_path / "cmp.json"
    args = (
        "--model-a", "default", "--model-b", "random-like:default", "--texts", str(texts),
        "--max-length", "32", "--device", "cpu",
    )  # fmt: skip
    proc = _cli(*args, "--out", str(out), cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert {"a", "b", "cka", "basis", "states"} <= set(data)
    assert data["a"]["source"] == "default" and data["b"]["source"] == "random-like:default"
    assert data["basis"] == "tokens"
    cka = np.array(data["cka"])
    assert cka.shape == (7, 7) and np.diag(cka).max() < 0.8
    assert len(data["states"]) == 7
    assert all(REQUIRED_STATE_KEYS <= set(row) for row in data["states"])
    assert [row["index"] for row in data["states"]] == list(range(7))
    # Both extractions and the comparison went to the disk cache (the Compare page's key), and a
    # second run writes the same report from it.
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 3
    again = tmp_path / "again.json"
    proc = _cli(*args, "--out", str(again), cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(again.read_text()) == data


def test_cli_bad_input(tmp_path, small_corpus):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(small_corpus.texts[:10]) + "\n")
    out = tmp_path / "cmp.json"
    proc = _cli(
        "--model-a", "random:bert:layers=2,width=32,heads=2", "--model-b", "/no/such/checkpoint",
        "--texts", str(texts), "--out", str(out), cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()
    assert last[-1].startswith("error:") and "does not exist" in last[-1]
    assert "Traceback" not in proc.stderr and not out.exists()
    proc = _cli(
        "--model-a", "random:bert:layers=2,width=32,heads=2", "--texts", str(texts),
        "--out", str(out), cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "self-comparison" in proc.stderr
    assert np.diag(np.array(json.loads(out.read_text())["cka"])) == pytest.approx(np.ones(3))
