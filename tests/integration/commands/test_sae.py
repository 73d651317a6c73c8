"""``isoscope sae`` as a user runs it: a planted SAE over a tiny BERT writes the documented JSON;
bad input is one line on stderr with exit 2, before any model loads where it can be."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.clirun import one_line_error, run_backend
from tests.sae_files import (
    DENSE_FEATURE,
    OUTLIER_DIM,
    OUTLIER_FEATURE,
    planted_sae,
    save_gemma_scope,
    save_outlier_bert,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory, three_texts):
    root = tmp_path_factory.mktemp("sae-cli")
    model = save_outlier_bert(root / "bert")
    # The dense feature along (1, ..., 1): state 1's mean is dominated by the planted dim's +20.
    sae = save_gemma_scope(planted_sae(np.ones(32)), root / "resid_post" / "layer_0_width_24")
    return {"model": model, "sae": sae, "texts": three_texts, "root": root}


def _run(files, tmp_path, *extra: str):
    out = tmp_path / "sae.json"
    args = ["--model", str(files["model"]), "--sae", str(files["sae"])]
    args += ["--texts", str(files["texts"]), "--out", str(out), "--device", "cpu", *extra]
    return run_backend("sae", *args, cache_dir=tmp_path / "cache", timeout=300), out


def test_writes_the_documented_json(files, tmp_path):
    proc, out = _run(files, tmp_path)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(out.read_text())
    assert payload["state"] == "1" and payload["sae"]["format"] == "gemma-scope"
    for kind in ("first_position", "massive", "special", "ordinary"):
        assert set(payload["fidelity"][kind]) == {"fvu", "l0", "tokens"}
    assert payload["fidelity"]["first_position"]["tokens"] == 3  # one per text
    dims = {d["dim"]: d for d in payload["dimensions"]}
    assert dims[OUTLIER_DIM]["features"][0]["feature"] == OUTLIER_FEATURE
    assert dims[OUTLIER_DIM]["features"][0]["loading"] == pytest.approx(1.0)
    assert payload["features"][0]["frequency"] >= payload["features"][-1]["frequency"]
    assert DENSE_FEATURE in {d["feature"] for d in payload["dense"]}
    assert str(OUTLIER_FEATURE) in payload["top_tokens"]
    assert "reads state 1" in proc.stderr


@pytest.mark.parametrize(
    "extra,needle",
    [
        (("--dense-share", "2"), "dense share must be between"),
        (("--features-per-dim", "0"), "features per dim must be between"),
        (("--state", "9"), "has states 0 (emb) to 2"),
        (("--sae", "/no/such/sae"), "does not exist"),
        (("--sae", "org"), "no SAE at 'org'"),
    ],
)
def test_bad_input_is_one_line(files, tmp_path, extra, needle):
    proc, out = _run(files, tmp_path, *extra)
    one_line_error(proc, needle)
    assert not out.exists()


def test_a_width_mismatch_and_a_pickle_are_one_line(files, tmp_path):
    narrow = save_gemma_scope(planted_sae(np.ones(16)), files["root"] / "narrow")
    proc, _ = _run(files, tmp_path, "--sae", str(narrow))
    one_line_error(proc, "width 16 but")
    pickled = files["root"] / "pickled"
    pickled.mkdir()
    (pickled / "sae_weights.pt").write_bytes(b"never read")
    proc, _ = _run(files, tmp_path, "--sae", str(pickled))
    one_line_error(proc, "never reads")


def test_card_out_writes_the_features_dimension_card(files, tmp_path):
    """``--feature F --card-out C`` writes feature F's card in ``isoscope dimension``'s schema:
    for the planted feature (encoder column e_d, b_enc 1.5) the dimension card of d plus one
    offset row."""
    from dataclasses import replace

    planted = planted_sae(np.ones(32))
    b_enc = planted.b_enc.copy()
    b_enc[OUTLIER_FEATURE] = 1.5
    sae = save_gemma_scope(replace(planted, b_enc=b_enc), tmp_path / "resid_post" / "layer_0_b")
    card_out = tmp_path / "card.json"
    proc, out = _run(files, tmp_path, "--sae", str(sae), "--feature", str(OUTLIER_FEATURE),
                     "--card-out", str(card_out), "--ablation-texts", "0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.exists()
    card = json.loads(card_out.read_text())
    dim_out = tmp_path / "dim.json"
    dim = run_backend(
        "dimension", "--model", str(files["model"]), "--texts", str(files["texts"]),
        "--state", "1", "--dim", str(OUTLIER_DIM), "--ablation-texts", "0", "--out",
        str(dim_out), "--device", "cpu", cache_dir=tmp_path / "cache", timeout=300,
    )  # fmt: skip
    assert dim.returncode == 0, dim.stderr
    expected = json.loads(dim_out.read_text())
    assert set(card) == set(expected) | {"sae", "feature"}
    assert card["feature"] == OUTLIER_FEATURE and card["state"] == "1"
    assert card["title"] == f"SAE feature {OUTLIER_FEATURE}" and card["offset"] == 1.5
    assert card["sum_check"] <= 1e-4 * max(1.0, card["value_scale"])
    *rows, offset = card["contributions"]
    assert offset["component"] == "offset" and offset["mean"] == pytest.approx(1.5)
    assert len(rows) == len(expected["contributions"])
    for got, want in zip(rows, expected["contributions"], strict=True):
        assert got["component"] == want["component"]
        assert got["mean"] == pytest.approx(want["mean"], abs=1e-4)
    assert any("pre-activation" in n and "JumpReLU" in n for n in card["notes"])
    assert "parts sum to the pre-activation" in proc.stderr


@pytest.mark.parametrize(
    "extra,needle",
    [
        (("--feature", "0"), "--feature and --card-out go together"),
        (("--card-out", "CARD"), "--feature and --card-out go together"),
        (("--feature", "24", "--card-out", "CARD"), "the SAE has features 0 to 23"),
        (("--feature", "0", "--card-out", "FOLDER"), "--card-out"),
        (("--feature", "0", "--card-out", "CARD", "--ablation-texts", "-1"), "ablation-texts"),
    ],
)
def test_bad_card_options_are_one_line(files, tmp_path, extra, needle):
    paths = {"CARD": str(tmp_path / "card.json"), "FOLDER": str(tmp_path)}
    proc, out = _run(files, tmp_path, *(paths.get(x, x) for x in extra))
    one_line_error(proc, needle)
    assert not out.exists() and not (tmp_path / "card.json").exists()
