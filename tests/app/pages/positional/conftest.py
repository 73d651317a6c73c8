"""The image and audio models and corpora of the Positional AppTests, built once for the package."""

from __future__ import annotations

import pytest

from tests.media_models import audio_folder, image_folder, save_audio_model, save_image_model


@pytest.fixture(scope="package")
def media(tmp_path_factory):
    root = tmp_path_factory.mktemp("pos-media")
    return {
        "vit": str(save_image_model("vit", root / "vit")),
        "beit": str(save_image_model("beit", root / "beit")),
        "wav2vec2": str(save_audio_model(root / "w2v")),
        "images": str(image_folder(root / "imgs", 4)),
        "audio": str(audio_folder(root / "clips")),
    }
