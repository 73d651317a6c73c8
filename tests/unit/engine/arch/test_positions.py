"""Position facts from modules and config (backend.engine.arch.positions)."""

from __future__ import annotations

import math

import torch
import transformers as tf

from backend.engine.arch.positions import (
    absolute_position_table,
    is_sinusoidal_table,
    position_kind,
    position_offset,
    position_table_of,
)


def _sinusoids(positions, width):
    pos = torch.arange(positions, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(width // 2) / (width // 2 - 1))
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)


def test_kinds_tables_and_offsets():
    opt = tf.OPTModel(
        tf.OPTConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            ffn_dim=32,
            word_embed_proj_dim=16,
            max_position_embeddings=20,
        )
    )
    assert position_kind(opt) == "learned absolute" and position_offset(opt) == 2
    assert absolute_position_table(opt) is position_table_of(opt) is opt.decoder.embed_positions
    llama = tf.LlamaModel(
        tf.LlamaConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    )
    assert position_kind(llama) == "rotary" and absolute_position_table(llama) is None


def test_a_sinusoidal_table_is_read_from_its_values():
    table = _sinusoids(12, 8)
    assert is_sinusoidal_table(table)
    assert not is_sinusoidal_table(torch.randn(12, 8)) and not is_sinusoidal_table(table[:, :7])
