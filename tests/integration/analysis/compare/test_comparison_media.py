"""Compare and CKA on images and audio: a tiny checkpoint against its ``random-like:`` copy on one
folder (the same patches or frames: the token basis), two models that cut the images differently
(one pooled vector per image), STS refused, and ``isoscope compare --images / --audio``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from isoscope.analysis.compare.comparison import compare, comparison_report
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionSettings, extract
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.inputs.pairs import sts_sample
from isoscope.engine.load.models import load_model
from tests.clirun import run_backend
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model

SETTINGS = ExtractionSettings(sample_size=60, batch_size=2)


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp-media")
    return {
        "vit": str(save_image_model("vit", root / "vit")),
        "dino": str(save_image_model("dinov2-reg", root / "dino")),
        "w2v": str(save_audio_model(root / "w2v")),
        "images": image_folder(root / "images", 4),
        "clips": audio_folder(root / "clips"),
    }


def _run(source, corpus):
    loaded = load_model(source, device="cpu")
    return loaded, extract(loaded, corpus, SETTINGS)


def test_vit_against_its_random_init_copy_on_images(media):
    images = load_media_folder(media["images"], "image")
    loaded_a, result_a = _run(media["vit"], images)
    loaded_b, result_b = _run(f"random-like:{media['vit']}", images)
    same = compare(result_a, result_a, loaded_a=loaded_a, loaded_b=loaded_a)
    assert np.diag(same.cka.matrix) == pytest.approx(np.ones(3), abs=1e-9)
    c = compare(result_a, result_b, loaded_a=loaded_a, loaded_b=loaded_b)
    assert c.cka.basis == "tokens" and c.cka.n == len(result_a.sample_index)
    assert c.cka.matrix.shape == (3, 3)  # (the tiny checkpoint is itself a seed-0 random init)
    assert c.ln is not None and c.abs_mean_diff.shape == (3, 32)
    report = comparison_report(c)
    assert report["corpus_a"] == images.name and len(report["states"]) == 3


def test_models_with_other_tokens_pool_each_image(media):
    """ViT (1 + 16 tokens) and DINOv2 with registers (1 + 4 + 16): no shared token sample, so
    CKA pools one vector per image, which needs the images themselves."""
    images = load_media_folder(media["images"], "image")
    loaded_a, result_a = _run(media["vit"], images)
    loaded_b, result_b = _run(media["dino"], images)
    with pytest.raises(InputError, match="inputs=corpus.items"):
        compare(result_a, result_b, loaded_a=loaded_a, loaded_b=loaded_b)
    c = compare(result_a, result_b, loaded_a=loaded_a, loaded_b=loaded_b, inputs=images.items)
    assert c.cka.basis == "texts" and c.cka.n == 4 and "per image or clip" in c.notes[0]


def test_sentence_pairs_are_refused_for_images(media):
    images = load_media_folder(media["images"], "image")
    loaded, result = _run(media["vit"], images)
    with pytest.raises(InputError, match="sentence pairs"):
        compare(result, result, loaded_a=loaded, loaded_b=loaded, pairs=sts_sample())


def test_wav2vec2_against_its_random_init_copy_on_clips(media):
    clips = load_media_folder(media["clips"], "audio")
    loaded_a, result_a = _run(media["w2v"], clips)
    loaded_b, result_b = _run(f"random-like:{media['w2v']}", clips)
    c = compare(result_a, result_b, loaded_a=loaded_a, loaded_b=loaded_b)
    assert c.cka.basis == "tokens" and c.cka.matrix.shape == (3, 3)


def test_compare_cli_on_an_image_folder(media, tmp_path):
    out = tmp_path / "cmp.json"
    proc = run_backend(
        "compare", "--model-a", media["vit"], "--model-b", media["dino"],
        "--images", str(media["images"]), "--out", str(out), "--sample-size", "60",
        cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["basis"] == "texts" and len(report["cka"]) == 3
    assert report["a"]["modality"] == "image"


def test_compare_cli_refuses_pairs_for_audio(media, tmp_path):
    proc = run_backend(
        "compare", "--model-a", media["w2v"], "--audio", str(media["clips"]),
        "--pairs", "x.csv", "--out", str(tmp_path / "o.json"), cache_dir=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "--pairs needs --texts" in proc.stderr


def test_a_checkpoint_trajectory_on_images(media, tmp_path):
    """The Compare page's trajectory tab is generic: checkpoints of a ViT on an image folder."""
    import shutil

    from isoscope.analysis.compare.trajectory import resolve_checkpoints, run_trajectory
    from isoscope.engine.store.cache import ResultCache

    run = tmp_path / "run"
    for step in (10, 20):
        shutil.copytree(media["vit"], run / f"checkpoint-{step}")
    images = load_media_folder(media["images"], "image")
    t = run_trajectory(
        resolve_checkpoints([str(run)]), images, SETTINGS, device="cpu",
        cache=ResultCache(tmp_path / "cache"),
    )  # fmt: skip
    assert not t.errors and t.steps == [10, 20]
    assert len(t.points[0].ln_gamma_flags) >= 2  # LayerNorms traced from an image


def test_trajectory_cli_on_an_image_folder(media, tmp_path):
    import shutil

    run = tmp_path / "run"
    for step in (1, 2):
        shutil.copytree(media["vit"], run / f"checkpoint-{step}")
    out = tmp_path / "traj.json"
    proc = run_backend(
        "trajectory", "--checkpoints", str(run), "--images", str(media["images"]), "--out", str(out),
        "--device", "cpu", "--sample-size", "60", cache_dir=tmp_path / "cache",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "extracting 4 images" in proc.stderr
    assert len(json.loads(out.read_text())["checkpoints"]) == 2
