"""GGUF checkpoints through the same path as the bundled SmolLM2: a tiny random HF causal LM
(2 layers, width 64) is written to a ``.gguf`` file with the ``gguf`` package (``tests/gguf_files.py``,
F32 tensors, a tiny ``tokenizer.ggml.*`` vocabulary), loaded with ``load_model(path)`` (transformers'
GGUF loader, converted once to safetensors in the isoscope cache), and must give the original
model's hidden states on the same token ids, and be read as causal."""

from __future__ import annotations

import pytest
import torch

from tests.gguf_files import gpt2_vocabulary, sentencepiece_vocabulary, write_gguf

_DEC = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    max_position_embeddings=128,
)
_HEAD16 = dict(head_dim=16)

# case -> (GGUF architecture, config class, causal-LM class, vocabulary, config kwargs, extras)
# extras: "config_arch" / "name" for write_gguf (Mistral is written as llama, named "mistral")
CASES: dict[str, tuple[str, str, str, object, dict, dict]] = {
    "llama": ("llama", "LlamaConfig", "LlamaForCausalLM", gpt2_vocabulary, _DEC, {}),
    "mistral": (
        "llama",
        "MistralConfig",
        "MistralForCausalLM",
        gpt2_vocabulary,
        _DEC,
        {"config_arch": "mistral", "name": "mistral"},
    ),
    "qwen2": ("qwen2", "Qwen2Config", "Qwen2ForCausalLM", gpt2_vocabulary, _DEC, {}),
    # the loader reads no head_dim for qwen3 (only rope.dimension_count, mapped to None), so a file
    # loads at Qwen3Config's default head_dim, 128 (as real Qwen3 checkpoints have)
    "qwen3": ("qwen3", "Qwen3Config", "Qwen3ForCausalLM", gpt2_vocabulary, _DEC, {}),
    "gemma2": (
        "gemma2",
        "Gemma2Config",
        "Gemma2ForCausalLM",
        sentencepiece_vocabulary,
        _DEC | _HEAD16 | dict(sliding_window=16),
        {},
    ),
    "gemma3": (
        "gemma3",
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        sentencepiece_vocabulary,
        _DEC | _HEAD16 | dict(sliding_window=16),
        {},
    ),
    "phi3": ("phi3", "Phi3Config", "Phi3ForCausalLM", sentencepiece_vocabulary, _DEC, {}),
    "starcoder2": (
        "starcoder2",
        "Starcoder2Config",
        "Starcoder2ForCausalLM",
        gpt2_vocabulary,
        _DEC,
        {},
    ),
    "stablelm": ("stablelm", "StableLmConfig", "StableLmForCausalLM", gpt2_vocabulary, _DEC, {}),
    "nemotron": ("nemotron", "NemotronConfig", "NemotronForCausalLM", gpt2_vocabulary, _DEC, {}),
    # the loader reads no expert widths (expert_feed_forward_length is not in its config map), so
    # the MoE files keep Qwen2MoeConfig's / Qwen3MoeConfig's default expert widths
    "qwen2_moe": (
        "qwen2moe",
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        gpt2_vocabulary,
        _DEC | dict(num_experts=4, num_experts_per_tok=2),
        {"config_arch": "qwen2_moe"},
    ),
    "qwen3_moe": (
        "qwen3moe",
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        gpt2_vocabulary,
        # norm_topk_prob: the loader's GGUF default for qwen3_moe (llama.cpp renormalises the top-k)
        _DEC | _HEAD16 | dict(num_experts=4, num_experts_per_tok=2, norm_topk_prob=True),
        {"config_arch": "qwen3_moe"},
    ),
    "gpt2": (
        "gpt2",
        "GPT2Config",
        "GPT2LMHeadModel",
        gpt2_vocabulary,
        # the loader maps context_length to n_ctx, which GPT2Config ignores: a file loads with
        # n_positions at its default, 1024, so the tiny model keeps that
        dict(n_embd=64, n_layer=2, n_head=4),
        {},
    ),
    "bloom": (
        "bloom",
        "BloomConfig",
        "BloomForCausalLM",
        gpt2_vocabulary,
        dict(hidden_size=64, n_layer=2, n_head=4),
        {},
    ),
}

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


def _build(case: str, folder):
    import transformers

    arch, config_cls, lm_cls, vocabulary, kwargs, extras = CASES[case]
    vocab = vocabulary()
    config = getattr(transformers, config_cls)(
        vocab_size=len(vocab["tokens"]),
        tie_word_embeddings=True,
        bos_token_id=vocab["bos"],
        eos_token_id=vocab["eos"],
        pad_token_id=vocab.get("pad"),
        **kwargs,
    )
    torch.manual_seed(0)
    model = getattr(transformers, lm_cls)(config).eval()
    with torch.no_grad():  # norms at 1 and biases at 0 would hide a missed offset or a lost bias
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(0.1 * torch.randn_like(param))
    path = write_gguf(model, folder / f"tiny-{case}.gguf", arch, vocab, **extras)
    return model, path, vocab


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
    from backend.engine.gguf import converted_folder
    from backend.engine.models import load_model

    original, path, vocab = _build(case, tmp_path)
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

    from backend.engine.gguf import _untied_state_dict

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    state = _untied_state_dict(model)
    own = {p.data_ptr() for p in model.parameters()}
    assert "transformer.wte.weight" in state and "lm_head.weight" not in state
    assert all(t.data_ptr() in own for n, t in state.items() if not n.endswith(".attn.bias"))
