"""Tiny random checkpoints (2 layers, width 64) of families whose modeling files compute softmax
attention in their own code, never through transformers' attention function: the scores
capture's tests (``tests/integration/engine/arch/test_scores.py``,
``tests/integration/analysis/positional/test_qk_own_code.py``). :func:`build` saves a seeded random
base model and the first zoo's tokenizer, which the real loader then reads like any checkpoint."""

from __future__ import annotations

from pathlib import Path

from tests.zoo import H, L, V, W, tokenizer

_IDS = dict(bos_token_id=1, eos_token_id=2)

# family (config model_type) -> (config class name, tiny kwargs)
FAMILIES: dict[str, tuple[str, dict]] = {
    "gptj": (
        "GPTJConfig",
        dict(vocab_size=V, n_embd=W, n_layer=L, n_head=H, rotary_dim=8, n_positions=128, **_IDS),
    ),
    "gpt_neo": (  # one global and one local layer, a window of 4 tokens
        "GPTNeoConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_layers=L,
            num_heads=H,
            attention_types=[[["global", "local"], 1]],
            window_size=4,
            max_position_embeddings=128,
            **_IDS,
        ),
    ),
    "codegen": (
        "CodeGenConfig",
        dict(vocab_size=V, n_embd=W, n_layer=L, n_head=H, rotary_dim=8, n_positions=128, n_ctx=128)
        | _IDS,
    ),
    "xglm": (
        "XGLMConfig",
        dict(
            vocab_size=V,
            d_model=W,
            num_layers=L,
            attention_heads=H,
            ffn_dim=128,
            max_position_embeddings=128,
            pad_token_id=0,
        ),
    ),
    "bloom": ("BloomConfig", dict(vocab_size=V, hidden_size=W, n_layer=L, n_head=H)),
    "mpt": ("MptConfig", dict(vocab_size=V, d_model=W, n_layers=L, n_heads=H, max_seq_len=128)),
    "falcon": (  # multi-query: one key head for the four query heads
        "FalconConfig",
        dict(vocab_size=V, hidden_size=W, num_hidden_layers=L, num_attention_heads=H),
    ),
    "xlm": (  # blocks kept as parallel lists: attentions[i], ffns[i]
        "XLMConfig",
        dict(vocab_size=V, emb_dim=W, n_layers=L, n_heads=H, max_position_embeddings=128),
    ),
    "openai-gpt": (
        "OpenAIGPTConfig",
        dict(vocab_size=V, n_embd=W, n_layer=L, n_head=H, n_positions=128),
    ),
    "squeezebert": (  # q/k/v and feed-forward are 1-D convolutions of kernel 1
        "SqueezeBertConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            intermediate_size=128,
            embedding_size=W,
            max_position_embeddings=128,
            pad_token_id=0,
        ),
    ),
}
CAUSAL = ("gptj", "gpt_neo", "codegen", "xglm", "bloom", "mpt", "falcon", "openai-gpt")
ROTARY = ("gptj", "codegen", "falcon")


def build(family: str, folder: Path, seed: int = 0) -> Path:
    """Save a seeded random ``family`` base model (safetensors) and the tokenizer to ``folder``."""
    return build_config(*FAMILIES[family], folder, seed)


def build_config(cls_name: str, kwargs: dict, folder: Path, seed: int = 0) -> Path:
    """Save a seeded random base model of ``transformers.<cls_name>(**kwargs)`` and the tokenizer."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(getattr(transformers, cls_name)(**kwargs))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer().save_pretrained(folder)
    return folder
