"""The bundled decoder SmolLM2-135M-Instruct: GGUF converted once to safetensors, then analysed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from isoscope.analysis.massive.scan import scan_massive
from isoscope.engine.load.gguf import SMOLLM2_SOURCE, bundled_gguf_path, converted_folder
from isoscope.engine.load.models import load_model

TEXTS = [
    "Summer is warm. Winter is cold.",
    "The cat sat on the mat, and the dog slept.",
    "Rivers run to the sea\nand clouds bring rain.",
    "Every morning I walk to the station.",
]


@pytest.fixture(scope="module")
def smollm2():
    return load_model(SMOLLM2_SOURCE, device="cpu")


@pytest.fixture(scope="module")
def smollm2_scan(smollm2):
    return scan_massive(smollm2, TEXTS, max_length=32)


def test_converted_once_into_a_safetensors_folder_in_the_cache(smollm2, _isolated_cache):
    folder = converted_folder(bundled_gguf_path())
    assert folder.parent == _isolated_cache / "models"
    assert smollm2.weights_dir == folder
    assert (folder / "model.safetensors").is_file() and (folder / "isoscope_gguf.json").is_file()
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert not list(folder.parent.glob("*.tmp-*"))  # no half-written conversion left behind
    info = smollm2.info
    assert (info.num_layers, info.hidden_size, info.num_heads) == (30, 576, 9)
    assert info.is_causal and info.position_embedding.startswith("rotary")


def test_second_load_reuses_the_conversion(smollm2, monkeypatch):
    import isoscope.engine.load.gguf as gguf

    def refuse(*args, **kwargs):
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf, "convert_gguf", refuse)
    again = load_model(SMOLLM2_SOURCE, device="cpu")
    assert again.fingerprint == smollm2.fingerprint
    # every weight comes from the file (a tied embedding saved under the LM head's name would
    # leave AutoModel's embedding randomly initialised, different on every load)
    torch.testing.assert_close(
        again.encoder.embed_tokens.weight, smollm2.encoder.embed_tokens.weight
    )


def test_massive_activations_in_one_dim_at_the_first_tokens(smollm2_scan):
    m = smollm2_scan.massive
    middle = range(13, 29)  # after the first layers, before the last (normed) state
    assert all(m.top_dim[s, 0] == 507 for s in middle)
    assert all(m.top_value[s, 0] > 1e4 for s in middle)
    assert all(m.median_abs[s] < 10 for s in middle)
    assert all(m.carriers[s]["first"] == len(TEXTS) for s in middle)
    assert m.top_value[-1, 0] < 100  # the final norm removes them
    assert m.top_value[0, 0] < 1  # and the embeddings have none


def test_attention_sinks_and_no_int8_outlier_features(smollm2_scan, smollm2):
    sinks = smollm2_scan.sinks
    assert sinks.alpha.shape == (30, 9)
    assert sinks.share > 0.5
    assert np.mean(sinks.share_per_layer[12:28]) > np.mean(sinks.share_per_layer[:4])
    assert smollm2_scan.int8.outlier_features == ()
    assert len(smollm2_scan.int8.site_names) == 60
    assert smollm2.encoder.config._attn_implementation != "eager"


def test_layernorm_naming_on_rmsnorm_pre_norm(smollm2):
    from isoscope.analysis.layernorm.params import default_roles, is_pre_ln, norms_of

    sites = norms_of(smollm2)
    assert is_pre_ln(sites) and default_roles(sites) == ("pre_attn", "pre_mlp")
    assert [s.name for s in sites[:2]] == ["L1.pre_attn_ln", "L1.pre_mlp_ln"]
    assert sites[-1].name == "final_ln" and not sites[-1].has_bias
    assert len(sites) == 61


def test_random_init_copy_for_the_trained_vs_random_contrast(smollm2):
    copy = load_model(f"random-like:{SMOLLM2_SOURCE}", device="cpu")
    assert copy.info.random_init and copy.info.num_layers == 30
    assert copy.fingerprint != smollm2.fingerprint
    scan = scan_massive(copy, TEXTS[:2], max_length=16, sinks=False, int8=False)
    assert scan.massive.top_value[15, 0] < 100  # no massive activations without training
