"""The input layout read from a model: modality from the forward signature, prefix tokens from the
embedding parameters, frame counts from the conv arithmetic."""

from __future__ import annotations

import numpy as np
import torch

from isoscope.engine.arch.layout import InputLayout, frames_for, modality_of


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


class _Embeddings(torch.nn.Module):
    """A ViT-style embedding block: [CLS], 4 registers and a position table of 1 + 2x2 rows."""

    def __init__(self, d: int = 6, registers: int = 4, relative: bool = False):
        super().__init__()
        self.config = type("Config", (), {"hidden_size": d})()
        self.cls_token = torch.nn.Parameter(torch.zeros(1, 1, d))
        self.register_tokens = torch.nn.Parameter(torch.ones(1, registers, d))
        if relative:
            self.relative_position_bias_table = torch.nn.Parameter(torch.zeros(9, 2))
        else:
            self.position_embeddings = torch.nn.Parameter(torch.arange(5.0 * d).reshape(1, 5, d))


_LAYOUT = InputLayout(
    "image", ("[CLS]", "[REG1]", "[REG2]", "[REG3]", "[REG4]"), (2, 2), 7, (14, 14)
)


def test_patch_position_table_prefers_the_position_parameter_over_a_same_shaped_block():
    from isoscope.engine.arch.layout import patch_position_table

    model = _Embeddings()  # the register block (1, 4, 6) has a row per patch too
    table = patch_position_table(model, _LAYOUT)
    assert table.path == "position_embeddings" and table.prefix_rows == 1
    np.testing.assert_array_equal(table.patches, np.arange(30).reshape(5, 6)[1:])


def test_no_table_says_what_the_model_uses_instead():
    from isoscope.engine.arch.layout import patch_position_table, position_scheme_note

    model = _Embeddings(registers=1, relative=True)
    assert patch_position_table(model, _LAYOUT) is None
    assert "one bias table shared by all layers" in position_scheme_note(model, _LAYOUT)
    assert patch_position_table(model, InputLayout()) is None  # text: no patch grid


def test_a_table_of_another_resolution_is_returned_on_its_own_grid():
    """DINOv2 keeps a 37x37 table (518 px) and interpolates it for a 16x16 input: here a 3x3
    table (+ [CLS]) for a 2x2 input."""
    from isoscope.engine.arch.layout import patch_position_table

    model = _Embeddings(registers=1)
    model.position_embeddings = torch.nn.Parameter(torch.arange(60.0).reshape(1, 10, 6))
    table = patch_position_table(model, _LAYOUT)
    assert table.grid == (3, 3) and table.interpolated_to == (2, 2) and table.prefix_rows == 1
    np.testing.assert_array_equal(table.patches, np.arange(60).reshape(10, 6)[1:])


# ----------------------------------------------------------------------------- spectrogram encoders


class _Mel(torch.nn.Module):
    """A Whisper-style front: two 1-D convolutions (strides 1 and 2) before a list of blocks."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv1d(4, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv1d(8, 8, 3, stride=2, padding=1)
        self.layers = torch.nn.ModuleList([torch.nn.Conv1d(8, 8, 3, stride=3)])  # not the front
        self.config = type("Config", (), {"max_source_positions": 50})()

    def forward(self, input_features=None, attention_mask=None):
        return input_features


def test_a_spectrogram_forward_is_audio_with_its_stride_from_the_front_convolutions():
    from isoscope.engine.arch.layout import conv_stride, feature_window, reads_spectrogram

    model = _Mel()
    assert modality_of(model) == "audio" and reads_spectrogram(model)
    assert not reads_spectrogram(_Wave())
    assert conv_stride(model) == 2  # the block's stride-3 convolution is not part of the front
    assert feature_window(model) == 100


def test_whisper_frames_are_the_ceiling_of_samples_over_the_stride_capped_at_the_window():
    layout = InputLayout("audio", sampling_rate=16000, frame_stride=320, window_frames=50)
    samples = np.array([1, 319, 320, 321, 640, 16000, 16320, 10**6])
    assert frames_for(_Mel(), samples, layout).tolist() == [1, 1, 1, 2, 2, 50, 50, 50]
    assert "padded to 1 s" in layout.describe()


def test_a_sinusoidal_table_is_told_from_a_learned_one():
    from isoscope.engine.arch import is_sinusoidal_table

    positions, d = 40, 16
    inv = 10000 ** (-torch.arange(d // 2) / (d // 2 - 1))
    angles = torch.arange(positions)[:, None] * inv[None, :]
    sinusoids = torch.cat([angles.sin(), angles.cos()], dim=1)  # Whisper's / Marian's layout
    assert is_sinusoidal_table(sinusoids)
    assert not is_sinusoidal_table(torch.randn(positions, d) * 0.02)  # a learned table
    assert not is_sinusoidal_table(torch.zeros(positions, d))  # NoPE's zeroed table
    assert not is_sinusoidal_table(torch.cat([angles.cos(), angles.sin()], dim=1))  # halves swapped
