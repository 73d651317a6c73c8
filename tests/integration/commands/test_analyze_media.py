"""``isoscope analyze --images DIR`` / ``--audio DIR``: one JSON per run, one error line otherwise."""

from __future__ import annotations

import json

from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model


def test_analyze_an_image_folder(run_analyze, tmp_path):
    model = save_image_model("dinov2-reg", tmp_path / "model")
    images = image_folder(tmp_path / "images")
    out = tmp_path / "out.json"
    proc = run_analyze(
        "--model", str(model), "--images", str(images), "--out", str(out), "--sample-size", "40",
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["corpus"]["kind"] == "image" and report["corpus"]["num_texts"] == 3
    assert report["model"]["prefix_tokens"] == ["[CLS]", "[REG1]", "[REG2]", "[REG3]", "[REG4]"]
    assert len(report["layers"]) == 3


def test_analyze_an_audio_folder(run_analyze, tmp_path):
    model = save_audio_model(tmp_path / "model")
    clips = audio_folder(tmp_path / "clips")
    out = tmp_path / "out.json"
    proc = run_analyze(
        "--model", str(model), "--audio", str(clips), "--out", str(out), "--sample-size", "40",
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["corpus"]["kind"] == "audio" and report["model"]["frames_per_second"] == 50


def test_bad_inputs_are_one_line_and_exit_2(run_analyze, tmp_path):
    (tmp_path / "empty").mkdir()
    out = str(tmp_path / "out.json")
    proc = run_analyze("--images", str(tmp_path / "empty"), "--out", out, cache_dir=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "no image files" in proc.stderr
    proc = run_analyze(
        "--images", str(tmp_path), "--texts", "x.txt", "--out", out, cache_dir=tmp_path
    )
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    image_folder(tmp_path / "imgs", count=1)
    proc = run_analyze("--images", str(tmp_path / "imgs"), "--out", out, cache_dir=tmp_path)
    assert proc.returncode == 2 and "reads text, not image" in proc.stderr


def test_analyze_an_image_folder_on_ray(run_analyze, tmp_path):
    """``--engine ray --images``: the driver reads the folder, one local Ray worker extracts."""
    model = save_image_model("vit", tmp_path / "model")
    images = image_folder(tmp_path / "images")
    out = tmp_path / "out.json"
    proc = run_analyze(
        "--model", str(model), "--images", str(images), "--out", str(out), "--sample-size", "40",
        "--engine", "ray", "--ray-address", "local", "--workers", "1", "--device", "cpu",
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["corpus"]["kind"] == "image" and report["corpus"]["num_texts"] == 3
    assert "engine: ray" in proc.stderr and "images" in proc.stderr
