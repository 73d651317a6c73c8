"""The quantization analysis on tiny random Llama (KL) and BERT (cosine) checkpoints and on the
bundled SmolLM2 (a few short texts): statistics, errors, end metric, sensitivity, and the model
left exactly as it was (weights restored, no hook left)."""

from __future__ import annotations

import math

import pytest
import torch

from isoscope.analysis.quant.params import ALPHA_GRID
from isoscope.analysis.quant.readiness import analyse, report_from
from isoscope.analysis.quant.schemes import SCHEMES
from isoscope.engine.load.models import load_model
from tests.quant_checks import TEXTS, hook_counts, no_hooks, snapshot


def _check(report, loaded, metric: str) -> dict:
    data = report.to_dict(model=loaded.info.to_dict(), corpus={"name": "t"})
    assert len(data["sites"]) == 4 * loaded.info.num_layers
    for site in data["sites"]:
        assert site["role"] in ("attn_in", "attn_out", "mlp_in", "mlp_out")
        assert site["max_abs"] >= site["median_abs"] > 0
        assert site["kurtosis"] > 1  # >= 1 for any distribution (Pearson)
        assert 0 <= site["share_gt_6"] <= 1
        assert set(site["error"]) == set(SCHEMES)
        assert all(0 <= v < 10 for v in site["error"].values())
        assert site["top_channels"][0]["max_abs"] == pytest.approx(site["max_abs"])
    end = data["end"]
    assert end["metric"] == metric and set(SCHEMES) <= set(end)
    assert [r["layer"] for r in data["sensitivity"]] == list(range(loaded.info.num_layers))
    if metric == "kl":
        assert end["full_precision"] == 0 and all(end[k] >= 0 for k in SCHEMES)
    else:
        assert end["full_precision"] == 1 and all(-1 <= end[k] <= 1 for k in SCHEMES)
    assert data["verdict"]
    return data


def test_tiny_llama_kl(tiny_tied_llama_dir):
    loaded = load_model(str(tiny_tied_llama_dir), device="cpu")
    before = snapshot(loaded.model)
    report = analyse(loaded, TEXTS, max_length=32, batch_size=3, error_tokens=40, end_tokens=40)
    data = _check(report, loaded, "kl")
    # each end figure's 95% bootstrap interval over the end texts holds the figure
    for k in SCHEMES:
        low, high = data["end_interval"][k]
        assert low - 1e-9 <= data["end"][k] <= high + 1e-9
    assert no_hooks(loaded.model)
    after = snapshot(loaded.model)
    assert all(torch.equal(before[k], after[k]) for k in before)
    # no α given: the sweep's best on the same scan, named in the verdict with its error
    sweep = {r["alpha"]: r["error"] for r in report.alpha_sweep}
    assert set(sweep) <= set(ALPHA_GRID) and list(sweep) == sorted(sweep)
    assert not report.alpha_given and sweep[report.alpha] == min(sweep.values())
    grid = sorted(ALPHA_GRID)  # the walk stops at a minimum with both its neighbours measured
    i = grid.index(report.alpha)
    assert all(grid[j] in sweep for j in (i - 1, i + 1) if 0 <= j < len(grid))
    assert f"α = {report.alpha:g}, the lowest mean per-site SmoothQuant error" in report.verdict()
    assert report.site_mean("smoothquant") == pytest.approx(sweep[report.alpha], rel=1e-6)
    given = report_from(loaded, report.scan, alpha=0.35, sensitivity=False)
    assert given.alpha == 0.35 and given.alpha_given and "α = 0.35 as given" in given.verdict()
    # the full-precision reference reproduces itself: no quantization, KL ~ 0
    scan = report.scan
    assert data["corpus"]["end_tokens"] == scan.end_tokens <= 40
    assert data["corpus"]["error_tokens"] == 40
    scales = scan.act_scales()
    assert set(scales) == {m for s in data["sites"] for m in s["modules"]}
    assert scales["layers.0.self_attn.q_proj"].dtype == torch.float32
    # grouped modules share one set of scales
    assert torch.equal(scales["layers.0.self_attn.q_proj"], scales["layers.0.self_attn.v_proj"])


def test_tiny_bert_cosine(tiny_bert_dir):
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    report = analyse(loaded, TEXTS, max_length=32, error_tokens=50, end_tokens=60)
    _check(report, loaded, "cosine")
    assert no_hooks(loaded.model)


def test_bundled_smollm2_few_texts():
    loaded = load_model("smollm2", device="cpu")
    report = analyse(loaded, TEXTS[:3], max_length=16, error_tokens=40, end_tokens=48)
    data = _check(report, loaded, "kl")
    assert data["sites"][0]["modules"][0] == "model.layers.0.self_attn.q_proj"
    end = data["end"]
    # outlier handling helps on a real checkpoint: keep-K and rotation beat plain per-token W8A8
    assert end["keep_k"] < end["per_token"] and end["rotation"] < end["per_token"]
    rho = data["spearman_error_vs_end"]
    assert rho is None or -1 <= rho <= 1
    assert not math.isnan(data["sites"][0]["kurtosis"])


@pytest.mark.parametrize("fixture", ["tiny_gpt2_dir", "tiny_gemma2_dir"])
def test_conv1d_and_sandwich_norm_models(fixture, request):
    """GPT-2's Conv1D weights are swapped transposed and restored; Gemma 2 runs end to end."""
    loaded = load_model(str(request.getfixturevalue(fixture)), device="cpu")
    before = snapshot(loaded.model)
    report = analyse(loaded, TEXTS, max_length=24, error_tokens=30, end_tokens=40)
    data = _check(report, loaded, "kl")
    assert all(math.isfinite(data["end"][k]) for k in SCHEMES)
    assert all(torch.equal(before[k], v) for k, v in snapshot(loaded.model).items())
    assert no_hooks(loaded.model)


PAIRS_CSV = """sentence1,sentence2,score
A man is playing a guitar.,A man plays the guitar.,4.8
A woman is slicing onions.,A woman cuts an onion.,4.2
The cat sleeps on the sofa.,A dog runs in the park.,0.6
Children play football outside.,Kids are playing soccer.,4.0
The stock market fell today.,A chef cooks pasta.,0.2
"""


def test_tiny_bert_sts_change_per_scheme(tiny_bert_dir, tmp_path):
    """With pairs, the encoder's end block holds STS Spearman in full precision (the score
    `isoscope sts` gives at the last state, from the same reader, pooling and scoring) and per
    scheme, and the change; the model is left as it was."""
    from isoscope.analysis.similarity import pool_pairs, sts_by_state
    from isoscope.engine.inputs.pairs import read_pairs_csv

    path = tmp_path / "pairs.csv"
    path.write_text(PAIRS_CSV)
    pairs = read_pairs_csv(path)
    loaded = load_model(str(tiny_bert_dir), device="cpu")
    first, second = pool_pairs(loaded, pairs, 32)
    raw = sts_by_state(first, second, pairs.scores, [[]] * first.shape[0])[-1]["raw"]
    # transformers installs its own output-recording hooks on the first hidden-state pass; ours
    # must all be gone afterwards
    hooks = hook_counts(loaded.model)
    before = snapshot(loaded.model)
    report = analyse(
        loaded, TEXTS, max_length=32, error_tokens=50, end_tokens=60, sensitivity=False, pairs=pairs
    )
    end = report.end
    assert end["metric"] == "cosine"
    assert set(end["sts_spearman"]) == {"full_precision", *SCHEMES}
    assert set(end["sts_spearman_change"]) == set(SCHEMES)
    assert end["sts_pairs"]["count"] == 5
    assert end["sts_spearman"]["full_precision"] == pytest.approx(raw)
    for k in SCHEMES:
        v = end["sts_spearman"][k]
        assert -100 <= v <= 100
        assert end["sts_spearman_change"][k] == pytest.approx(v - raw)
    assert "STS Spearman" in report.verdict()
    assert hook_counts(loaded.model) == hooks
    assert all(torch.equal(before[k], v) for k, v in snapshot(loaded.model).items())
