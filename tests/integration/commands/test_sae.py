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
