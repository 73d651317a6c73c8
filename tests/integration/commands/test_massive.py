"""``isoscope massive`` as a user runs it: the JSON schema, and bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from isoscope.analysis.massive.params import HIGH_NORM_FACTOR
from tests.clirun import argv_over, one_line_error, run_backend


def _run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return run_backend("massive", *args, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def texts(three_texts) -> Path:
    return three_texts


def _check_schema(data: dict, num_layers: int, num_heads: int) -> None:
    assert {"model", "corpus", "layers", "attention_sink", "int8"} <= set(data)
    layers = data["layers"]
    assert [layer["index"] for layer in layers] == list(range(num_layers + 1))
    assert layers[0]["name"] == "emb" and layers[1]["name"] == "1"
    for layer in layers:
        assert set(layer) == {"index", "name", "median_abs", "top", "n_massive"}
        values = [t["value"] for t in layer["top"]]
        assert len(values) == 3 and values == sorted(values, reverse=True)
        for top in layer["top"]:
            assert set(top) == {"value", "dim", "position", "token"}
            assert isinstance(top["position"], int) and top["position"] >= 0
    sink = data["attention_sink"]
    assert {"alpha", "share_per_layer", "share"} <= set(sink)
    assert len(sink["alpha"]) == num_layers and len(sink["alpha"][0]) == num_heads
    assert len(sink["share_per_layer"]) == num_layers and 0 <= sink["share"] <= 1
    int8 = data["int8"]
    shares = [d["site_share"] for d in int8["dims"]]
    assert shares == sorted(shares, reverse=True)
    assert all(set(d) == {"dim", "site_share"} for d in int8["dims"])
    assert isinstance(int8["outlier_features"], list)


def test_massive_json_on_a_tiny_llama(tiny_llama_dir, texts, tmp_path):
    out = tmp_path / "massive.json"
    proc = _run(
        "--model", str(tiny_llama_dir), "--texts", str(texts), "--out", str(out),
        "--max-length", "16", "--batch-size", "2", cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    _check_schema(data, num_layers=2, num_heads=4)
    assert data["corpus"]["texts"] == 3
    assert "sink share" in proc.stderr


def test_massive_json_on_the_bundled_decoder(texts, tmp_path, _isolated_cache):
    out = tmp_path / "smollm2.json"
    proc = _run(
        "--model", "smollm2", "--texts", str(texts), "--out", str(out), "--max-length", "32",
        cache_dir=_isolated_cache,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    _check_schema(data, num_layers=30, num_heads=9)
    top = data["layers"][15]["top"][0]
    assert top["dim"] == 507 and top["value"] > 1e4
    assert data["int8"]["outlier_features"] == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--texts", "missing.txt"), "missing.txt"),
        (("--max-length", "1"), "--max-length"),
        (("--model", "/nowhere/model.gguf"), "GGUF file"),
        (("--batch-size", "0"), "--batch-size"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, needle, texts, tmp_path):
    base = {"--texts": str(texts), "--model": "default", "--out": str(tmp_path / "o.json")}
    lines = one_line_error(_run(*argv_over(base, args), cache_dir=tmp_path), needle)
    assert len(lines) == 1


# ----------------------------------------------------------------------------- --images
@pytest.fixture(scope="module")
def vision(tmp_path_factory) -> tuple[Path, Path]:
    from tests.media_models import image_folder, save_image_model

    root = tmp_path_factory.mktemp("massive-images")
    return save_image_model("dinov2-reg", root / "model"), image_folder(root / "imgs", 3)


def test_images_give_carriers_and_high_norm_patches(vision, tmp_path):
    model, folder = vision
    out = tmp_path / "massive.json"
    args = ("--model", str(model), "--images", str(folder), "--out", str(out), "--device", "cpu")
    proc = _run(*args, cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["corpus"]["images"] == 3 and data["corpus"]["tokens"] == 3 * (1 + 4 + 16)
    assert [c["state"] for c in data["carriers"]] == ["emb", "1", "2"]
    assert set(data["carriers"][0]) == {"state", "CLS", "distillation", "register", "patch"}
    assert [h["state"] for h in data["high_norm"]] == ["emb", "1", "2"]
    for h in data["high_norm"]:
        assert h["threshold"] == pytest.approx(HIGH_NORM_FACTOR.default * h["median_patch_norm"])
        assert 0 <= h["share"] <= 1
    assert "high-norm patches at state 2" in proc.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--high-norm-factor", "1"), "--high-norm-factor must be between 1.1 and 100, got 1.0"),
        (("--texts", "{texts}"), "reads image, not text"),
    ],
)
def test_images_bad_input_is_one_line(vision, texts, tmp_path, extra, message):
    model, folder = vision
    inputs = ("--images", str(folder)) if "--texts" not in extra else ()
    extra = tuple(a.replace("{texts}", str(texts)) for a in extra)
    args = ("--model", str(model), *inputs, *extra, "--out", str(tmp_path / "o.json"))
    proc = _run(*args, "--device", "cpu", cache_dir=tmp_path / "cache")
    assert proc.returncode != 0 and message in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "Traceback" not in proc.stderr and len(errors) == 1 and message in errors[0]
