"""Tiny GGUF files (llama.cpp's format) written with the ``gguf`` package, for the GGUF loading
tests (``tests/integration/engine/load/test_gguf.py``).

:func:`write_gguf` takes a tiny random HF causal-LM and writes what llama.cpp's converter would:

- every tensor as F32 under the name the ``gguf`` package's tensor-name map gives its HF name (the
  map transformers' GGUF loader inverts), the tied LM head left out (no ``output.weight`` means
  tied embeddings to the loader);
- the value transforms llama.cpp applies and transformers' tensor processors undo (:data:`ENCODE`):
  Llama's rotary permutation of q/k rows, Gemma's norms stored as ``1 + weight``;
- the config as the ``<arch>.*`` metadata keys of transformers' ``GGUF_CONFIG_MAPPING[arch]``, read
  back from the model's config (so a key the loader reads is always written);
- a tiny tokenizer vocabulary as ``tokenizer.ggml.*``: GPT-2-style byte-level BPE (the 256 byte
  symbols, a few merges and ``<|endoftext|>``) or llama sentencepiece-style (pieces with scores).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np


def _llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` (its inverse is transformers' ``_reverse_permute_weights``)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def _encode_llama(name: str, w: np.ndarray, config) -> np.ndarray:
    if name.endswith("attn_q.weight"):
        return _llama_permute(w, config.num_attention_heads)
    if name.endswith("attn_k.weight"):
        return _llama_permute(w, config.num_key_value_heads)
    return w


def _encode_gemma(name: str, w: np.ndarray, config) -> np.ndarray:
    return w + 1.0 if "norm.weight" in name else w  # llama.cpp stores Gemma's (1 + weight)


def _encode_gpt2(name: str, w: np.ndarray, config) -> np.ndarray:
    # GPT-2's Conv1D stores (in, out); llama.cpp writes nn.Linear's (out, in)
    fused = ("attn_qkv.weight", "ffn_down.weight", "ffn_up.weight", "attn_output.weight")
    return w.T.copy() if name.endswith(fused) else w


def _encode_bloom(name: str, w: np.ndarray, config) -> np.ndarray:
    # BLOOM interleaves q/k/v per head; llama.cpp writes the q, k and v blocks one after another
    if "attn_qkv" not in name:
        return w
    n_head, n_embd = config.n_head, config.hidden_size
    blocks = w.reshape(n_head, 3, n_embd // n_head, *w.shape[1:]).swapaxes(0, 1)
    return blocks.reshape(w.shape).copy()


def _encode_qwen2moe(name: str, w: np.ndarray, config) -> np.ndarray:
    # llama.cpp writes the shared-expert gate (1, H) as a vector; the loader adds the axis back
    return w.reshape(-1).copy() if "ffn_gate_inp_shexp" in name else w


# GGUF architecture -> llama.cpp's value transform (what transformers' TensorProcessor undoes)
ENCODE = {
    "llama": _encode_llama,
    "gemma2": _encode_gemma,
    "gemma3": _encode_gemma,
    "nemotron": _encode_gemma,  # llama.cpp stores Nemotron's (1 + weight) norms the same way
    "gpt2": _encode_gpt2,
    "bloom": _encode_bloom,
    "qwen2moe": _encode_qwen2moe,
}


def _moe_experts(
    hf_name: str, w: np.ndarray, gguf_block: str | None
) -> list[tuple[str, np.ndarray]]:
    """Fused expert tensors (``mlp.experts.gate_up_proj`` (E, 2I, H), ``mlp.experts.down_proj``)
    as llama.cpp's ``ffn_{gate,up,down}_exps``."""
    m = re.search(r"layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$", hf_name)
    if m is None:
        return []
    blk = f"blk.{m[1]}"
    if m[2] == "down_proj":
        return [(f"{blk}.ffn_down_exps.weight", w)]
    half = w.shape[1] // 2
    return [
        (f"{blk}.ffn_gate_exps.weight", w[:, :half].copy()),
        (f"{blk}.ffn_up_exps.weight", w[:, half:].copy()),
    ]


# ----------------------------------------------------------------------------- tokenizers


def gpt2_vocabulary() -> dict:
    """A byte-level BPE vocabulary: the 256 byte symbols, a few merges, ``<|endoftext|>``."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tokens = list(bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he", "Ġ a", "i n", "a t", "Ġ c", "Ġc at"]
    tokens += ["".join(m.split(" ")) for m in merges]
    types = [1] * len(tokens)  # NORMAL
    tokens.append("<|endoftext|>")
    types.append(3)  # CONTROL
    eot = len(tokens) - 1
    return {
        "model": "gpt2",
        "tokens": tokens,
        "token_type": types,
        "merges": merges,
        "bos": eot,
        "eos": eot,
        "add_bos": True,
    }


def sentencepiece_vocabulary() -> dict:
    """A llama-sentencepiece-style vocabulary: specials, ``▁``-prefixed pieces and letters, with
    scores (the merges are derived from them by the loader)."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    letters = list("abcdefghijklmnopqrstuvwxyzTSW.,!?")
    pieces = ["▁", "▁t", "he", "▁the", "▁c", "at", "▁cat", "▁s", "▁sat", "▁a", "in", "on", "▁on"]
    tokens = specials + pieces + letters
    types = [3, 3, 3, 2] + [1] * (len(pieces) + len(letters))  # CONTROL, UNKNOWN, NORMAL
    scores = [0.0] * 4 + [-float(i) for i in range(len(pieces) + len(letters))]
    return {
        "model": "llama",
        "tokens": tokens,
        "token_type": types,
        "scores": scores,
        "bos": 2,
        "eos": 1,
        "unk": 3,
        "pad": 0,
        "add_bos": True,
    }


def _write_vocabulary(writer, vocab: dict) -> None:
    writer.add_tokenizer_model(vocab["model"])
    writer.add_token_list(vocab["tokens"])
    writer.add_token_types(vocab["token_type"])
    if "merges" in vocab:
        writer.add_token_merges(vocab["merges"])
    if "scores" in vocab:
        writer.add_token_scores(vocab["scores"])
    writer.add_bos_token_id(vocab["bos"])
    writer.add_eos_token_id(vocab["eos"])
    if "unk" in vocab:
        writer.add_unk_token_id(vocab["unk"])
    if "pad" in vocab:
        writer.add_pad_token_id(vocab["pad"])
    writer.add_add_bos_token(vocab["add_bos"])


# ----------------------------------------------------------------------------- the file


def _config_value(config, attr: str):
    if attr == "rope_theta":  # transformers 5 keeps it in rope_parameters
        params = getattr(config, "rope_parameters", None) or {}
        params = params.get("full_attention", params)
        return params.get("rope_theta")
    return getattr(config, attr, None)


def write_gguf(
    model, path: Path, arch: str, vocab: dict, *, config_arch: str | None = None, name: str = ""
) -> Path:
    """Write ``model`` (an HF ``*ForCausalLM`` with tied embeddings) and ``vocab`` to ``path`` as a
    GGUF file of architecture ``arch`` (F32 tensors).

    ``config_arch`` is the key of ``GGUF_CONFIG_MAPPING`` when it differs from ``arch`` (llama.cpp
    writes Mistral as ``llama``, and transformers tells them apart by ``general.name == "mistral"``,
    passed as ``name``)."""
    import gguf
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    config = model.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name or f"tiny-{arch}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, attr in GGUF_CONFIG_MAPPING[config_arch or arch].items():
        value = _config_value(config, attr) if attr else None
        if value is None or isinstance(value, (list, dict)):
            continue
        full = f"{arch}.{key}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, int):
            writer.add_uint32(full, value)
        else:
            writer.add_float32(full, value)
    _write_vocabulary(writer, vocab)

    arch_id = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch)
    names = gguf.get_tensor_name_map(arch_id, config.num_hidden_layers)
    encode = ENCODE.get(arch, lambda name, w, config: w)
    tied = getattr(config, "tie_word_embeddings", False)
    for hf_name, tensor in model.state_dict().items():
        if tied and hf_name == "lm_head.weight":
            continue
        w = tensor.detach().float().numpy().copy()
        if experts := _moe_experts(hf_name, w, None):
            for gguf_name, part in experts:
                writer.add_tensor(gguf_name, part)
            continue
        base, suffix = hf_name.rsplit(".", 1)
        # as transformers' reverse map, try the submodules' names too (BLOOM's embedding norm)
        gguf_name = names.get_name(base) or names.get_name(base.split(".", 1)[-1])
        if gguf_name is None:
            raise KeyError(f"{hf_name}: no GGUF name for {arch}")
        full = f"{gguf_name}.{suffix}"
        writer.add_tensor(full, encode(full, w, config))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


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


def build_case(case: str, folder: Path):
    """``(model, path, vocabulary)``: a 2-layer random model of ``case`` (:data:`CASES`), its
    norms and biases nudged off 1 and 0, written as ``folder / tiny-<case>.gguf``."""
    import torch
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
