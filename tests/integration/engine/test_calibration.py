"""The calibration before a load, on tiny random checkpoints through the real loader: the shape
read from a checkpoint's config and from a GGUF's metadata, the real timed slice, its result
kept and found again after the load (backend/engine/budget/calibration.py)."""

from __future__ import annotations

import json

import pytest

from isoscope.engine.budget import calibration, throughput, time_estimate
from isoscope.engine.inputs.corpus import Corpus

TEXTS = Corpus(tuple(f"text number {i} with a few words in it" for i in range(12)), "twelve")


def test_the_first_page_of_a_larger_model_is_announced_from_a_real_calibration(
    tiny_llama_dir, tmp_path, monkeypatch
):
    from isoscope.engine.load.models import load_model

    monkeypatch.setattr(throughput, "cache_knee", lambda device: 0)
    # two small models' records, as a fresh cache holding the bundled models' has
    for parameters in (20_000, 60_000):
        throughput.record(tmp_path, "cpu", parameters, 10**6, 1e-11 * parameters * 10**6, 0.0)
    announced = []
    loaded = load_model(
        str(tiny_llama_dir),
        device="cpu",
        on_preflight=time_estimate.time_preflight(tmp_path, "cpu", TEXTS, 32, announced.append),
    )
    (estimate,) = announced
    assert estimate.seconds is not None and estimate.seconds > 0
    assert "extraction speed from a 2-layer calibration at the model's width" in (
        estimate.describe()
    )
    kept = json.loads((tmp_path / throughput.FILE_NAME).read_text())
    (shapes,) = [v for k, v in kept.items() if k == throughput.calibration_key("cpu")]
    (key,) = shapes
    # after the load, the model's own config finds the same calibration (the page's budget)
    assert throughput.model_shape(loaded.model).key == key
    parameters = throughput.parameter_count(loaded.model)
    after = throughput.seconds_per_token_parameter(
        tmp_path, "cpu", parameters, throughput.model_shape(loaded.model)
    )
    assert after == pytest.approx(shapes[key] / parameters)


def test_a_calibration_of_a_tiny_shape_is_a_positive_time_per_token(tiny_llama_dir):
    shape = calibration.folder_shape(tiny_llama_dir)
    assert shape.layers == 2 and shape.width == 32
    seconds = calibration.calibrate(shape, "cpu", 16, budget_s=0.05)
    assert seconds is not None and 0 < seconds < 1.0


@pytest.mark.parametrize("case", ["llama", "gpt2", "bloom"])
def test_a_ggufs_shape_is_read_from_its_metadata_as_its_converted_config_says(case, tmp_path):
    from tests.gguf_files import build_case

    model, path, _ = build_case(case, tmp_path)
    shape = calibration.folder_shape(path)
    assert shape is not None
    assert shape.key == calibration.shape_of_config(model.config).key
    assert calibration.calibrate(shape, "cpu", 8, budget_s=0.05) is not None


def test_a_folder_without_a_config_has_no_shape(tmp_path):
    assert calibration.folder_shape(tmp_path) is None
    (tmp_path / "x.gguf").write_bytes(b"not a gguf")
    assert calibration.folder_shape(tmp_path / "x.gguf") is None


@pytest.mark.parametrize("fixture", ["tiny_llama_dir", "tiny_gpt2_dir", "tiny_bert_dir"])
def test_the_slices_layers_are_found_in_the_module_tree(fixture, request):
    """The layers are timed apart from the embedding and the outputs, whatever the stack is
    called (``layers``, ``h``, ``encoder.layer``)."""
    from transformers import AutoModel

    shape = calibration.folder_shape(request.getfixturevalue(fixture))
    model = AutoModel.from_config(calibration.slice_config(shape))
    stack = calibration.layer_list(model, shape.run_layers)
    assert stack is not None and len(stack) == shape.run_layers
    assert calibration.calibrate(shape, "cpu", 8, texts=4, budget_s=0.05) is not None
