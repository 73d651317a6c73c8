"""The report for image and audio analyses: the sections that apply (outliers, anisotropy, the
LayerNorm ablation on the images themselves), sentence similarity left out with its reason, one
line naming what is left out, and ``isoscope report --images / --audio``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from isoscope.share.report import build_report
from tests.clirun import run_backend
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model


def _planted_vit(folder: Path) -> Path:
    """A tiny ViT whose LayerNorms all scale dim 5 by 20: a LayerNorm outlier to ablate."""
    from transformers import ViTModel

    save_image_model("vit", folder)
    model = ViTModel.from_pretrained(folder)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight[5] = 20.0
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def vit_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-vit")
    model = _planted_vit(root / "vit")
    images = load_media_folder(image_folder(root / "images", 4), "image")
    loaded = load_model(str(model), device="cpu")
    return model, root / "images", loaded, images, extract(loaded, images, ExtractionSettings())


def test_image_report_ablates_on_the_images(vit_run):
    _, _, loaded, images, result = vit_run
    rep = build_report(loaded, result, inputs=images.items)
    ln = rep.section("layernorm")
    assert ln.skipped is None, ln.skipped
    assert ln.findings[0].startswith("LayerNorm outlier dims: 5 ")
    assert "mean-pooled vector" in ln.findings[1] and "4 images" in ln.findings[1]
    assert "does not apply" in rep.section("similarity").skipped
    assert rep.corpus["kind"] == "image"
    line = rep.corpus["notices"][-1]
    assert line.startswith("this analysis read images:") and "Sentence similarity" in line


def test_image_report_without_the_items_says_so(vit_run):
    _, _, loaded, _, result = vit_run
    rep = build_report(loaded, result, sections=("layernorm",))
    assert "not given" in rep.section("layernorm").skipped


def test_report_cli_on_images_and_audio(vit_run, tmp_path):
    model, images, *_ = vit_run
    out = tmp_path / "r.html"
    proc = run_backend(
        "report", "--model", str(model), "--images", str(images), "--out", str(out),
        "--device", "cpu", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "this analysis read images" in page and "Left out: does not apply" in page
    clips = audio_folder(tmp_path / "clips")
    w2v = save_audio_model(tmp_path / "w2v")
    proc = run_backend(
        "report", "--model", str(w2v), "--audio", str(clips), "--out", str(out),
        "--device", "cpu", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "this analysis read audio clips" in out.read_text()


def test_report_cli_refuses_pairs_for_images(tmp_path):
    proc = run_backend(
        "report", "--images", "demo", "--pairs", "p.csv", "--out", str(tmp_path / "r.html"),
        cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "--pairs needs --texts" in proc.stderr
