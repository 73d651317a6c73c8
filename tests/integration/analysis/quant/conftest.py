"""Tiny checkpoints for the quantization tests: a Llama with tied embeddings (so the end metric is
the next-token KL) and a Gemma 2 (sandwich norms), saved with the bundled tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest


def _save(tmp_path_factory, name: str, model) -> Path:
    from backend.engine.models import bundled_tokenizer

    folder = tmp_path_factory.mktemp(name)
    model.save_pretrained(folder)
    bundled_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_tied_llama_dir(tmp_path_factory) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaModel

    from backend.engine.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        eos_token_id=None,
        tie_word_embeddings=True,
    )
    return _save(tmp_path_factory, "tiny-tied-llama", LlamaModel(config))


@pytest.fixture(scope="session")
def tiny_gemma2_dir(tmp_path_factory) -> Path:
    import torch
    from transformers import Gemma2Config, Gemma2Model

    from backend.engine.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    torch.manual_seed(0)
    config = Gemma2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        eos_token_id=None,
    )
    return _save(tmp_path_factory, "tiny-gemma2", Gemma2Model(config))
