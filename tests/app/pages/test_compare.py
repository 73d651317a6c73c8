"""AppTest of the Compare page: MiniLM against its random-init copy (CKA heatmap, per-state views,
LayerNorm deltas), one model on two corpora (CKA skipped, said so), and the trajectory tab on a
folder of tiny checkpoints, a folder without checkpoints and a damaged checkpoint."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TIMEOUT = 300  # the first run extracts the bundled MiniLM and its random-init copy


def _page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception
    return at


def _charts(at: AppTest) -> dict[str, dict]:
    return {el.proto.id: json.loads(el.proto.spec) for el in at.get("plotly_chart")}


def _values(data) -> np.ndarray:
    """A Plotly array from the JSON spec: a list, or {"dtype", "bdata", "shape"} (base64)."""
    if isinstance(data, dict) and "bdata" in data:
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
        shape = [int(n) for n in str(data.get("shape", len(flat))).split(",")]
        return flat.reshape(shape)
    return np.asarray(data)


def _chart(at: AppTest, key: str) -> dict:
    found = [fig for id_, fig in _charts(at).items() if id_.endswith(key) or key in id_]
    assert found, f"no chart {key!r} in {list(_charts(at))}"
    return found[0]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Path:
    """checkpoint-10/, checkpoint-20/, checkpoint-30/: tiny random BERTs (seeds 0, 1, 2)."""
    from isoscope.engine.load.models import build_random_model, bundled_tokenizer

    tokenizer = bundled_tokenizer()
    root = tmp_path_factory.mktemp("run")
    for seed, step in enumerate((10, 20, 30)):
        model = build_random_model(
            "bert", {"layers": 2, "width": 32, "heads": 2, "seed": seed}, len(tokenizer)
        )
        model.save_pretrained(root / f"checkpoint-{step}")
        tokenizer.save_pretrained(root / f"checkpoint-{step}")
    return root


def test_default_compares_with_the_random_init_copy():
    at = _page()
    assert [t.value for t in at.title] == ["Compare"]
    assert not at.error
    assert at.selectbox(key="cmp_model_b").value.startswith("random-init copy of A")
    cka = _chart(at, "cmp_cka")
    z = _values(cka["data"][0]["z"])
    assert z.shape == (7, 7)  # emb + 6 layers on both sides
    assert np.diag(z).max() < 0.8  # trained vs random init: well below 1
    assert len(cka["layout"]["shapes"]) == 7  # the outlined diagonal
    assert any("same" in c.value and "sampled tokens" in c.value for c in at.caption)
    lines = _chart(at, "cmp_aniso")
    assert {t["name"] for t in lines["data"]} == {"A", "B"}
    assert any("Dims that moved most" in m.value for m in at.markdown)
    outliers = _chart(at, "cmp_outliers")
    lost = next(t for t in outliers["data"] if t["name"].startswith("lost"))
    assert 223 in _values(lost["y"])  # MiniLM's outlier dim is gone in the random-init copy


def test_self_comparison_and_sts():
    at = _page()
    at.selectbox(key="cmp_model_b").set_value(
        next(o for o in at.selectbox(key="cmp_model_b").options if o.startswith("default"))
    ).run()
    assert not at.exception and not at.error
    z = _values(_chart(at, "cmp_cka")["data"][0]["z"])
    assert np.diag(z) == pytest.approx(np.ones(7), abs=1e-6)
    at.radio(key="cmp_sts").set_value("bundled sample pairs").run()
    assert not at.exception and not at.error
    sts = _chart(at, "cmp_sts_fig")
    assert {t["name"] for t in sts["data"]} == {"A", "B"}


def test_one_model_two_corpora():
    at = _page()
    at.radio(key="cmp_mode").set_value("one model, two corpora").run()
    assert not at.exception
    assert any("Paste corpus B" in i.value for i in at.info)
    at.text_area(key="cmp_corpus_b_text").input(
        "def main():\n    return 0\nSELECT * FROM users;\nimport numpy as np\nx = [1, 2, 3]\n"
    ).run()
    assert not at.exception and not at.error
    assert any("CKA is skipped" in i.value for i in at.info)
    assert _values(_chart(at, "cmp_mean_diff")["data"][0]["z"]).shape == (7, 384)


def test_bad_model_b_shows_an_error():
    at = _page()
    custom = next(o for o in at.selectbox(key="cmp_model_b").options if "local folder" in o)
    at.selectbox(key="cmp_model_b").set_value(custom).run()
    at.text_input(key="cmp_model_b_custom").input("/no/such/checkpoint").run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)


def test_trajectory_tab(checkpoints, tmp_path):
    at = _page()
    at.text_area(key="cmp_traj_paths").input(str(checkpoints)).run()
    at.button(key="cmp_traj_run").click().run()
    assert not at.exception and not at.error
    lines = _chart(at, "cmp_traj_lines")
    assert _values(lines["data"][0]["x"]).tolist() == [10, 20, 30]
    assert len(lines["data"]) == 3  # emb, 1, 2
    assert any("3 checkpoints, steps 10, 20, 30" in c.value for c in at.caption)

    empty = tmp_path / "empty"
    empty.mkdir()
    at.text_area(key="cmp_traj_paths").input(str(empty)).run()
    at.button(key="cmp_traj_run").click().run()
    assert not at.exception
    assert any("holds no checkpoint folders" in e.value for e in at.error)

    damaged = tmp_path / "damaged"
    shutil.copytree(checkpoints, damaged)
    (damaged / "checkpoint-20" / "model.safetensors").write_bytes(b"not a safetensors file")
    at.text_area(key="cmp_traj_paths").input(str(damaged)).run()
    at.button(key="cmp_traj_run").click().run()
    assert not at.exception
    assert any("checkpoint-20" in e.value and "failed to load" in e.value for e in at.error)
    assert _values(_chart(at, "cmp_traj_lines")["data"][0]["x"]).tolist() == [
        10,
        30,
    ]  # the others are kept
