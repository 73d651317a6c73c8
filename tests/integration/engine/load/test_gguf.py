"""GGUF checkpoints through the same path as the bundled SmolLM2: a tiny random HF causal LM
(2 layers, width 64) is written to a ``.gguf`` file with the ``gguf`` package (``tests/gguf_files.py``,
F32 tensors, a tiny ``tokenizer.ggml.*`` vocabulary), loaded with ``load_model(path)`` (transformers'
GGUF loader, converted once to safetensors in the isoscope cache), and must give the original
model's hidden states on the same token ids, and be read as causal."""

from __future__ import annotations

import pytest
import torch

from tests.gguf_files import CASES, build_case

# cases transformers' GGUF loader cannot read, and why (a skip reason)
CANNOT_LOAD = {
    "mistral": (
        "transformers 5.23 cannot load a Mistral GGUF: it reads llama.cpp's `llama` file with "
        "general.name 'mistral' as model_type 'mistral', then looks 'mistral' up in gguf-py's "
        "MODEL_ARCH_NAMES for the tensor names, which has no such entry (gguf 0.19): "
        "'Unknown gguf model_type: mistral in gguf-py'"
    ),
}

# architectures the loader lists (GGUF_SUPPORTED_ARCHITECTURES, GGUF_CONFIG_ARCHS) without a case
# above, and why
NOT_TESTED = {
    "t5": "encoder-decoder: isoscope converts GGUF files with AutoModelForCausalLM",
    "umt5": "encoder-decoder: isoscope converts GGUF files with AutoModelForCausalLM",
    "mamba": "a state-space model, no attention: not a Transformer for isoscope",
    "lfm2": "hybrid short-convolution model (new GGUF path); not attempted yet",
    "qwen35": "hybrid GatedDeltaNet model (new GGUF path); not attempted yet",
    "qwen35moe": "hybrid GatedDeltaNet MoE (new GGUF path); not attempted yet",
    "falcon": "fused query_key_value layout of llama.cpp's converter; not attempted yet",
    "gpt_oss": "sinks, MoE with biases and its own expert split; not attempted yet",
    "gemma4": "mixed head sizes (global_head_dim); not attempted yet",
    "deci": "variable per-layer widths (Nemotron-NAS); not attempted yet",
    "minimax_m2": "MoE with fused experts and score bias; not attempted yet",
}


def test_every_loader_architecture_is_tested_or_explained():
    from transformers.integrations.gguf import GGUF_CONFIG_ARCHS
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    listed = (set(GGUF_SUPPORTED_ARCHITECTURES) | set(GGUF_CONFIG_ARCHS)) - {"general", "tokenizer"}
    covered = {c for c in CASES if c not in CANNOT_LOAD} | set(CANNOT_LOAD) | set(NOT_TESTED)
    assert listed <= covered, sorted(listed - covered)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.skip(reason=CANNOT_LOAD[c])) if c in CANNOT_LOAD else c
        for c in CASES
    ],
)
def test_gguf_file_loads_like_smollm2(case, tmp_path, _isolated_cache):
    from isoscope.engine.load.gguf import converted_folder
    from isoscope.engine.load.models import load_model

    original, path, vocab = build_case(case, tmp_path)
    loaded = load_model(str(path), device="cpu")
    # the SmolLM2 path: a safetensors copy in the isoscope cache, loaded like any folder
    assert loaded.weights_dir == converted_folder(path, _isolated_cache)
    assert (loaded.weights_dir / "model.safetensors").is_file()
    assert loaded.info.is_causal
    ids = torch.randint(
        0, len(vocab["tokens"]), (2, 12), generator=torch.Generator().manual_seed(3)
    )
    base = original.base_model
    with torch.inference_mode():
        want = base(input_ids=ids, output_hidden_states=True).hidden_states
        got = loaded.encoder(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(got) == len(want) == 3
    for a, b in zip(want, got, strict=True):
        assert float((a - b).abs().max()) < 1e-4
    # and isoscope's own hooked forward pass on a text agrees with HF's
    from tests.zoo_checks import hidden_states_match

    assert hidden_states_match(loaded) < 1e-4


def test_the_conversion_writes_from_the_models_own_memory():
    """A GGUF conversion holds one copy of the weights: the state dict it writes shares the
    model's storage (no clone), and a tied tensor is written once."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from isoscope.engine.load.gguf import _untied_state_dict

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    state = _untied_state_dict(model)
    own = {p.data_ptr() for p in model.parameters()}
    assert "transformer.wte.weight" in state and "lm_head.weight" not in state
    assert all(t.data_ptr() in own for n, t in state.items() if not n.endswith(".attn.bias"))
