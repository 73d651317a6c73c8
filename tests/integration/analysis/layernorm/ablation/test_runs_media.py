"""LayerNorm ablation on images and audio through the real loader: the end metric is the
final-state cosine (no LM loss, no sentence pairs), controls run on the same items, group-norm
clips are batched by length, and the one-dim sweep runs too."""

from __future__ import annotations

import numpy as np
import pytest

from isoscope.analysis.layernorm.ablation import run_ablation, sweep
from isoscope.analysis.layernorm.params import norms_of
from isoscope.engine.errors import InputError
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model


@pytest.fixture(scope="module")
def vit(tmp_path_factory):
    root = tmp_path_factory.mktemp("ln-vit")
    loaded = load_model(str(save_image_model("vit", root / "model")), device="cpu")
    return loaded, load_media_folder(image_folder(root / "images", 3), "image")


@pytest.fixture(scope="module")
def wav2vec2(tmp_path_factory):
    root = tmp_path_factory.mktemp("ln-w2v")
    loaded = load_model(str(save_audio_model(root / "model")), device="cpu")
    return loaded, load_media_folder(audio_folder(root / "clips"), "audio")


def test_vit_norms_are_traced_from_an_image(vit):
    loaded, _ = vit
    sites = norms_of(loaded)
    assert "final" in {s.role for s in sites}
    assert all(s.module.weight.shape == (32,) for s in sites)


def test_vit_ablation_reports_the_final_state_cosine(vit):
    loaded, images = vit
    report = run_ablation(loaded, images.items, [0, 1, 2], random_controls=2, batch_size=2)
    assert report.modality == "image" and report.end_metric == "final_state_cosine"
    assert report.mlm_loss_original is None and not report.notices  # no "no MLM head" notice
    final = report.final_state_cosine()
    assert final["ablation"] == pytest.approx(float(report.effect.embedding_cosine[-1]))
    assert len(final["controls"]) == 2 and final["ablation"] < 1.0
    body = report.to_json()
    assert body["end_metric"] == "final_state_cosine" and body["num_texts"] == 3


def test_nothing_ablated_gives_cosine_one(vit):
    """Ablating in no norm at all (the emb norms of a ViT do not exist): sanity of the metric."""
    loaded, images = vit
    report = run_ablation(loaded, images.items, [5], random_controls=0, batch_size=3)
    assert np.all(report.effect.embedding_cosine[:1] == pytest.approx(1.0))


def test_pairs_are_refused_for_images(vit):
    loaded, images = vit
    with pytest.raises(InputError, match="final-state cosine"):
        run_ablation(loaded, images.items, [0], pairs=(["a"] * 3, ["b"] * 3, [1, 2, 3]))


def test_group_norm_clips_are_ablated_one_length_per_batch(wav2vec2):
    loaded, clips = wav2vec2
    together = run_ablation(loaded, clips.items, [0, 1], random_controls=1, batch_size=8)
    alone = run_ablation(loaded, clips.items, [0, 1], random_controls=1, batch_size=1)
    np.testing.assert_allclose(
        together.effect.embedding_cosine, alone.effect.embedding_cosine, atol=1e-6
    )
    assert together.modality == "audio"


def test_sweep_on_images(vit):
    loaded, images = vit
    result = sweep(loaded, images.items, dims=[0, 1, 2], copies=2)
    assert result.embedding_cosine.shape == (3, 3) and result.mlm_loss is None


def test_sweep_on_group_norm_clips_keeps_one_length(wav2vec2):
    loaded, clips = wav2vec2
    result = sweep(loaded, clips.items, dims=[0, 1], copies=2)
    assert result.num_texts == 2  # the two 0.5 s clips: the 0.3 s one would need padding
