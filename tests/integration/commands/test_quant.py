"""``isoscope quant`` as a user runs it: the JSON keys of issue 26, act_scales as safetensors
(loaded back), and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from isoscope.analysis.quant.params import ALPHA_GRID
from tests.clirun import run_backend

SITE_KEYS = {
    "modules",
    "layer",
    "role",
    "max_abs",
    "median_abs",
    "kurtosis",
    "share_gt_6",
    "top_channels",
    "error",
}
SCHEMES = {"per_tensor", "per_token", "keep_k", "smoothquant", "rotation", "w4_g128"}


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("quant") / "texts.txt"
    path.write_text("Summer is warm. Winter is cold.\nThe cat sat on the mat.\nA third text here\n")
    return path


def test_quant_json_and_act_scales(tiny_llama_dir, texts, tmp_path):
    out, scales = tmp_path / "q.json", tmp_path / "act_scales.safetensors"
    proc = run_backend(
        "quant",
        "--model",
        str(tiny_llama_dir),
        "--texts",
        str(texts),
        "--out",
        str(out),
        "--max-length",
        "16",
        "--keep",
        "2",
        "--alpha",
        "0.6",
        "--act-scales",
        str(scales),
        "--recipe",
        str(tmp_path / "recipe.yaml"),
        "--recipe-json",
        str(tmp_path / "recipe.json"),
        cache_dir=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    # the recipe: YAML, plain JSON and the output's `recipe` carry the same decisions
    import yaml

    recipe = yaml.safe_load((tmp_path / "recipe.yaml").read_text())
    decisions = json.loads((tmp_path / "recipe.json").read_text())
    assert (
        recipe["quant_stage"]["quant_modifiers"] == decisions["recipe"] == data["recipe"]["recipe"]
    )
    assert (
        recipe["quant_stage"]["quant_modifiers"]["SmoothQuantModifier"]["smoothing_strength"] == 0.6
    )
    assert "Decision: W8A8" in proc.stderr
    assert {"model", "corpus", "sites", "end", "sensitivity", "spearman_error_vs_end"} <= set(data)
    assert len(data["sites"]) == 8
    for site in data["sites"]:
        assert SITE_KEYS <= set(site)
        assert set(site["error"]) == SCHEMES
        assert {"channel", "max_abs"} == set(site["top_channels"][0])
    # tiny_llama_dir unties its embeddings and saves no lm_head: the end metric is the cosine
    assert data["end"]["metric"] in ("kl", "cosine")
    assert SCHEMES | {"metric", "full_precision"} == set(data["end"])
    assert [r["layer"] for r in data["sensitivity"]] == [0, 1]
    settings = data["settings"]
    assert (settings["keep"], settings["alpha"], settings["alpha_given"]) == (2, 0.6, True)
    swept = [r["alpha"] for r in settings["alpha_sweep"]]  # --alpha overrides the sweep's choice
    assert set(swept) <= set(ALPHA_GRID) and swept == sorted(swept) and len(swept) >= 2
    loaded = load_file(str(scales))
    names = {m for s in data["sites"] for m in s["modules"]}
    assert set(loaded) == names
    q = loaded["layers.0.self_attn.q_proj"]
    assert q.dtype == torch.float32 and q.shape == (32,)
    assert float(q.max()) == pytest.approx(data["sites"][0]["max_abs"], rel=1e-6)
    # the overlap with the hidden-state outlier dims is filled in, by the page's rule: the
    # headline outlier dims of the extraction (first position left out on a decoder) of the
    # state each block reads
    from isoscope.analysis.outliers import outlier_dims_by_state
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.load.models import load_model

    model = load_model(str(tiny_llama_dir), device="cpu")
    settings = ExtractionSettings(max_length=16, batch_size=16, exclude_first=True)
    dims = outlier_dims_by_state(extract(model, load_corpus_file(str(texts)), settings))
    for site in data["sites"]:
        if site["width"] != 32:  # channels are hidden dims only at the residual width
            assert site["outlier_overlap"] is None
            continue
        top = [t["channel"] for t in site["top_channels"]]
        assert site["outlier_overlap"] == [c for c in top if c in dims[site["layer"]]]
        assert isinstance(site["massive_overlap"], list)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--keep", "-1"], "--keep"),
        (["--alpha", "1.5"], "--alpha"),
        (["--act-scales", "scales.pt"], ".safetensors"),
        (["--max-length", "1"], "--max-length"),
        (["--recipe", "recipe.txt"], ".yaml"),
        (["--recipe-json", "recipe.yaml"], ".json"),
        (["--ignore-share", "2"], "--ignore-share"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(texts, tmp_path, args, message):
    proc = run_backend(
        "quant",
        "--model",
        "random:gpt2:layers=1,width=16,heads=2",
        "--texts",
        str(texts),
        "--out",
        str(tmp_path / "q.json"),
        *args,
        cache_dir=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]


def test_missing_texts_file(tmp_path):
    proc = run_backend(
        "quant",
        "--texts",
        str(tmp_path / "nope.txt"),
        "--out",
        str(tmp_path / "q.json"),
        cache_dir=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error:") and len(proc.stderr.strip().splitlines()) == 1


PAIRS_CSV = """sentence1,sentence2,score
A man is playing a guitar.,A man plays the guitar.,4.8
A woman is slicing onions.,A woman cuts an onion.,4.2
The cat sleeps on the sofa.,A dog runs in the park.,0.6
Children play football outside.,Kids are playing soccer.,4.0
"""


def test_encoder_pairs_add_sts_to_end_matching_isoscope_sts(tiny_bert_dir, texts, tmp_path):
    """``--pairs`` (the sts command's reader): ``end`` gets the STS Spearman in full precision,
    per scheme and the change; full precision equals ``isoscope sts``'s raw score at the last
    state on the same file."""
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(PAIRS_CSV)
    out, sts_out = tmp_path / "q.json", tmp_path / "sts.json"
    common = ["--model", str(tiny_bert_dir), "--max-length", "16"]
    proc = run_backend(
        "quant",
        *common,
        "--texts",
        str(texts),
        "--out",
        str(out),
        "--pairs",
        str(pairs),
        "--no-sensitivity",
        "--no-outlier-overlap",
        cache_dir=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert all(site["outlier_overlap"] is None for site in data["sites"])
    end = data["end"]
    assert end["metric"] == "cosine"
    assert set(end["sts_spearman"]) == SCHEMES | {"full_precision"}
    assert set(end["sts_spearman_change"]) == SCHEMES
    assert end["sts_pairs"]["count"] == 4
    proc = run_backend(
        "sts", *common, "--pairs", str(pairs), "--out", str(sts_out), "--clip", "none",
        cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    last = json.loads(sts_out.read_text())["states"][-1]
    assert end["sts_spearman"]["full_precision"] == pytest.approx(last["raw"], abs=1e-6)


def test_pairs_for_a_decoder_are_refused_in_one_line(texts, tmp_path):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text(PAIRS_CSV)
    proc = run_backend(
        "quant",
        "--model",
        "random:gpt2:layers=1,width=16,heads=2",
        "--texts",
        str(texts),
        "--out",
        str(tmp_path / "q.json"),
        "--pairs",
        str(pairs),
        cache_dir=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "--pairs" in lines[0]
