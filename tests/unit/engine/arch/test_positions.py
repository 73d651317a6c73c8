"""Position facts from modules and config (isoscope.engine.arch.positions)."""

from __future__ import annotations

import math

import torch

from isoscope.engine.arch.positions import (
    absolute_position_table,
    is_sinusoidal_table,
    position_kind,
    position_offset,
    position_table_of,
)
from tests.arch_models import tiny


def _sinusoids(positions, width):
    pos = torch.arange(positions, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(10000.0) * torch.arange(width // 2) / (width // 2 - 1))
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)


def test_kinds_tables_and_offsets():
    opt = tiny("OPT", ffn_dim=32, word_embed_proj_dim=16, max_position_embeddings=20)
    assert position_kind(opt) == "learned absolute" and position_offset(opt) == 2
    assert absolute_position_table(opt) is position_table_of(opt) is opt.decoder.embed_positions
    llama = tiny("Llama")
    assert position_kind(llama) == "rotary" and absolute_position_table(llama) is None


def test_a_sinusoidal_table_is_read_from_its_values():
    table = _sinusoids(12, 8)
    assert is_sinusoidal_table(table)
    assert not is_sinusoidal_table(torch.randn(12, 8)) and not is_sinusoidal_table(table[:, :7])
