"""Massive activations and token norms of tiny random image models loaded through the loader: a
value planted in a register token is found and attributed to it; the norms are the extraction's
hidden states; the image is shown as the model sees it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.highnorm import scan_images
from isoscope.engine.errors import InputError
from isoscope.engine.extraction.media import media_forward, model_view, prepare_media
from isoscope.engine.inputs.media import load_media_folder
from isoscope.engine.load.models import load_model
from tests.media_models import image_folder, save_image_model


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return load_media_folder(image_folder(tmp_path_factory.mktemp("images"), 3), "image")


@pytest.fixture()
def dinov2(tmp_path_factory):
    """A fresh load per test: the test plants a value in its weights."""
    folder = save_image_model("dinov2-reg", tmp_path_factory.mktemp("dinov2"))
    return load_model(str(folder), device="cpu")


def test_a_massive_value_in_a_register_is_found_and_attributed(dinov2, images):
    with torch.no_grad():
        dinov2.encoder.embeddings.register_tokens[0, 1, 5] = 5000.0  # [REG2], dim 5
    scan = scan_images(dinov2, images.items, batch_size=2)
    massive = scan.massive
    assert massive.top_value[0, 0] == pytest.approx(5000.0)
    assert (massive.top_dim[0, 0], massive.top_token[0, 0]) == (5, "[REG2]")
    assert massive.top_position[0, 0] == 2  # [CLS], [REG1], [REG2]
    assert massive.carriers[0]["register"] == 3  # one per image
    assert massive.carriers[0]["patch"] == 0 and massive.median_exact
    assert scan.norms.shape == (3, 3, 1 + 4 + 16) and scan.grid == (4, 4) and scan.prefix == 5
    assert scan.norm_by_kind()["register"][0] > 1000


def test_token_norms_are_the_hidden_state_norms(dinov2, images):
    scan = scan_images(dinov2, images.items[:2])
    tokens = prepare_media(dinov2, list(images.items[:2]))
    with torch.inference_mode():
        hidden = torch.stack(media_forward(dinov2, tokens, np.arange(2)))
    np.testing.assert_allclose(scan.norms, hidden.norm(dim=-1).numpy(), rtol=1e-5)


def test_model_view_is_what_the_processor_feeds(dinov2, images):
    picture = model_view(dinov2, images.items[0])
    assert picture.shape == (28, 28, 3) and picture.dtype == np.uint8
    again = dinov2.processor(images=[picture], return_tensors="np")["pixel_values"][0]
    direct = dinov2.processor(images=[images.items[0].data], return_tensors="np")["pixel_values"][0]
    np.testing.assert_allclose(again, direct, atol=0.02)  # uint8 rounding only


def test_text_models_are_refused(tiny_bert_dir, images):
    bert = load_model(str(tiny_bert_dir), device="cpu")
    with pytest.raises(InputError, match="does not read images"):
        scan_images(bert, images.items)
