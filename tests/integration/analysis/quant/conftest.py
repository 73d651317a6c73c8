"""Tiny checkpoints for the quantization tests: a Llama with tied embeddings (so the end metric is
the next-token KL) and a Gemma 2 (sandwich norms), saved with the bundled tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tiny_decoders import save_tiny_decoder


@pytest.fixture(scope="session")
def tiny_tied_llama_dir(tmp_path_factory) -> Path:
    from transformers import LlamaConfig, LlamaModel

    return save_tiny_decoder(
        tmp_path_factory,
        "tiny-tied-llama",
        LlamaConfig,
        LlamaModel,
        num_hidden_layers=3,
        tie_word_embeddings=True,
    )


@pytest.fixture(scope="session")
def tiny_gemma2_dir(tmp_path_factory) -> Path:
    from transformers import Gemma2Config, Gemma2Model

    return save_tiny_decoder(tmp_path_factory, "tiny-gemma2", Gemma2Config, Gemma2Model, head_dim=8)
