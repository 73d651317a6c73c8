"""The input layout read from a model: modality from the forward signature, prefix tokens from the
embedding parameters, frame counts from the conv arithmetic."""

from __future__ import annotations

import numpy as np
import torch

from backend.engine.layout import InputLayout, frames_for, modality_of


class _Pixels(torch.nn.Module):
    def forward(self, pixel_values=None, output_hidden_states=False):
        return pixel_values


class _Wave(torch.nn.Module):
    def forward(self, input_values=None, attention_mask=None):
        return input_values


def test_modality_from_the_forward_signature():
    assert modality_of(_Pixels()) == "image"
    assert modality_of(_Wave()) == "audio"
    assert modality_of(torch.nn.Linear(2, 2)) == "text"


def test_image_layout_names_and_description():
    layout = InputLayout("image", ("[CLS]", "[REG1]", "[REG2]"), (2, 3), 14, (28, 42))
    assert layout.num_tokens == 3 + 6
    assert layout.token_names()[:4] == ["[CLS]", "[REG1]", "[REG2]", "patch r0c0"]
    assert layout.token_names()[-1] == "patch r1c2"
    assert layout.describe() == "1 CLS + 2 REG + 2x3 patches of 14 px"
    assert layout.input_size() == "28x42 px"


def test_audio_layout_frames_per_second():
    layout = InputLayout("audio", sampling_rate=16000, frame_stride=320, pad_with_mask=False)
    assert layout.frames_per_second == 50
    assert "equal-length batches" in layout.describe()


def test_frames_from_conv_arithmetic_without_the_models_formula():
    class Config:
        conv_kernel = (10, 3)
        conv_stride = (5, 2)

    class Model(torch.nn.Module):
        config = Config()

    assert frames_for(Model(), np.array([1600, 400])).tolist() == [159, 39]
