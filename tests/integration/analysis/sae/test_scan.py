"""Released-SAE formats read through the real loader (folders and the stand-in Hub) and the SAE
analysis on a tiny BERT with a planted outlier dimension: planted features are found with the
numbers planted, fidelity matches a direct computation, and bad SAEs are refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.sae.encode import reconstruct
from isoscope.analysis.sae.load import load_sae, on_model
from isoscope.analysis.sae.params import TOKEN_KINDS, SaeSettings
from isoscope.analysis.sae.scan import run_sae
from isoscope.engine.inputs.corpus import Corpus
from tests.extraction_checks import TEXTS, direct
from tests.sae_files import (
    DEAD_FEATURE,
    DENSE_FEATURE,
    MASSIVE_DIM,
    OUTLIER_DIM,
    OUTLIER_FEATURE,
    planted_sae,
    save_gemma_scope,
    save_outlier_bert,
    save_saelens,
    save_sparsify,
)

CORPUS = Corpus(TEXTS * 3, "sae test texts")
SAVERS = {
    "gemma-scope": lambda sae, root: save_gemma_scope(sae, root / "resid_post" / "layer_0_sae"),
    "saelens": lambda sae, root: save_saelens(sae, root / "blocks.0.hook_resid_post"),
    "sparsify": lambda sae, root: save_sparsify(sae, root),
}


@pytest.fixture(scope="module")
def outlier_model(tmp_path_factory):
    from isoscope.engine.load.models import load_model

    folder = save_outlier_bert(tmp_path_factory.mktemp("outlier-bert"))
    return load_model(str(folder), device="cpu")


@pytest.fixture(scope="module")
def planted(outlier_model):
    """The planted SAE, its dense feature along state 1's mean direction over CORPUS."""
    vectors, _ = direct(outlier_model, CORPUS.texts)
    return planted_sae(vectors[1].mean(axis=0))


@pytest.fixture(scope="module")
def readings(outlier_model, planted, tmp_path_factory):
    """Each format's SAE run over CORPUS: (format -> (reading, extraction, SaeOnModel))."""
    out = {}
    for name, save in SAVERS.items():
        folder = save(planted, tmp_path_factory.mktemp(name))
        on = on_model(load_sae(str(folder)), outlier_model)
        reading, result = run_sae(outlier_model, CORPUS, on, SaeSettings(max_length=32))
        out[name] = (reading, result, on)
    return out


@pytest.mark.parametrize("fmt", list(SAVERS))
def test_planted_features_are_found_with_the_planted_numbers(readings, fmt):
    reading, result, on = readings[fmt]
    assert on.state == 1 and reading.state_name == "1"
    assert result.tokens.position[0] == 0  # first positions and special tokens are read too
    dims = {d["dim"]: d for d in reading.dimensions}
    assert OUTLIER_DIM in dims and "outlier" in dims[OUTLIER_DIM]["kinds"]
    strongest = dims[OUTLIER_DIM]["features"][0]
    assert strongest["feature"] == OUTLIER_FEATURE
    assert strongest["loading"] == pytest.approx(1.0, abs=1e-6)
    dense = {d["feature"]: d for d in reading.dense}
    assert DENSE_FEATURE in dense
    assert dense[DENSE_FEATURE]["cos_mean"] == pytest.approx(1.0, abs=1e-5)
    assert dense[DENSE_FEATURE]["frequency"] > 0.1
    assert DEAD_FEATURE in reading.dead.tolist()
    assert DEAD_FEATURE not in [f["feature"] for f in reading.features()]
    assert reading.frequency[OUTLIER_FEATURE] == pytest.approx(1.0)  # h[t, 7] ~ 20 everywhere


@pytest.mark.parametrize("fmt", list(SAVERS))
def test_fidelity_matches_a_direct_computation(readings, outlier_model, fmt):
    """FVU per token kind and the per-token relative error against the SAE applied by hand to
    every token's state-1 vector (each text run alone)."""
    reading, result, on = readings[fmt]
    vectors, _ = direct(outlier_model, CORPUS.texts)
    x = torch.from_numpy(vectors[1]).float()
    acts, x_hat = reconstruct(on.sae, x)
    x, x_hat = x.double().numpy(), x_hat.double().numpy()
    err = ((x - x_hat) ** 2).sum(axis=1)
    spread = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    np.testing.assert_allclose(reading.relative_error, err / (x**2).sum(axis=1), rtol=1e-4)
    np.testing.assert_array_equal(reading.l0, (acts > 0).sum(-1).numpy())
    assert sum(reading.fidelity[k]["tokens"] for k in TOKEN_KINDS) == len(x)
    for kind in (*TOKEN_KINDS, "all"):
        pick = np.ones(len(x), bool) if kind == "all" else reading.kind == kind
        row = reading.fidelity[kind]
        assert row["tokens"] == int(pick.sum())
        if pick.any():
            assert row["fvu"] == pytest.approx(err[pick].sum() / spread[pick].sum(), rel=1e-4)
    assert reading.fidelity["first_position"]["tokens"] == len(CORPUS)


def test_the_dimension_keeps_what_the_reconstruction_keeps(readings, outlier_model):
    """kept = sum x_hat[t, d] x[t, d] / sum x[t, d]^2 over the dim's largest |h[t, d]|."""
    reading, _, on = readings["gemma-scope"]
    vectors, _ = direct(outlier_model, CORPUS.texts)
    x = torch.from_numpy(vectors[1]).float()
    _, x_hat = reconstruct(on.sae, x)
    column, kept_column = x[:, OUTLIER_DIM].double(), x_hat[:, OUTLIER_DIM].double()
    top = column.abs().topk(SaeSettings().dim_tokens).indices
    expected = float(kept_column[top] @ column[top] / (column[top] @ column[top]))
    row = next(d for d in reading.dimensions if d["dim"] == OUTLIER_DIM)
    assert row["kept"] == pytest.approx(expected, rel=1e-4)


def test_top_tokens_of_a_feature_are_its_largest_activations(readings):
    reading, _, _ = readings["saelens"]
    tops = reading.top_tokens(OUTLIER_FEATURE)
    values = [t["activation"] for t in tops]
    assert values == sorted(values, reverse=True) and len(values) == SaeSettings().top_tokens
    assert reading.top_tokens(DEAD_FEATURE) == []


def test_to_dict_has_the_documented_keys(readings):
    payload = readings["gemma-scope"][0].to_dict()
    assert payload["state"] == "1"
    assert set(payload["fidelity"]) == {*TOKEN_KINDS, "all"}
    assert set(payload["fidelity"]["ordinary"]) == {"fvu", "l0", "tokens"}
    assert {"dim", "features", "kept"} <= set(payload["dimensions"][0])
    assert {"feature", "loading"} <= set(payload["dimensions"][0]["features"][0])
    assert {"feature", "frequency"} <= set(payload["features"][0])


def test_massive_tokens_form_their_own_kind(tmp_path_factory):
    """A model whose dim 3 reaches past Sun et al.'s threshold on some tokens: those tokens
    (first positions aside) are the massive kind, its FVU is the direct computation's, and dim 3
    is listed as a massive dimension."""
    from isoscope.engine.load.models import load_model

    model = load_model(
        str(save_outlier_bert(tmp_path_factory.mktemp("massive-bert"), massive=True)),
        device="cpu",
    )
    vectors, _ = direct(model, CORPUS.texts)
    x = vectors[1]
    folder = save_gemma_scope(planted_sae(x.mean(axis=0)), tmp_path_factory.mktemp("g") / "s")
    on = on_model(load_sae(str(folder)), model)
    reading, result = run_sae(model, CORPUS, on, SaeSettings(max_length=32))
    median = np.median(np.abs(x))
    threshold = max(100.0, 1000.0 * median)
    assert reading.massive_threshold == pytest.approx(threshold, rel=0.02)
    expected = (np.abs(x).max(axis=1) > threshold) & (result.tokens.position != 0)
    assert 0 < expected.sum() < len(x)
    np.testing.assert_array_equal(reading.kind == "massive", expected)
    _, x_hat = reconstruct(on.sae, torch.from_numpy(x).float())
    err = ((x - x_hat.double().numpy()) ** 2).sum(axis=1)
    spread = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    fvu = err[expected].sum() / spread[expected].sum()
    assert reading.fidelity["massive"]["fvu"] == pytest.approx(fvu, rel=1e-4)
    dims = {d["dim"]: d for d in reading.dimensions}
    assert "massive" in dims[MASSIVE_DIM]["kinds"]
