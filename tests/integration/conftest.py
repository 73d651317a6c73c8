"""Integration-tier helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def run_analyze():
    """``run_analyze(*args, cache_dir=...)``: ``python -m backend analyze`` in a subprocess, as a user runs it."""

    def run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ISOSCOPE_CACHE_DIR": str(cache_dir),
        }
        return subprocess.run(
            [sys.executable, "-m", "backend", "analyze", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A 2-layer, width-32 random LlamaModel (RMSNorm, rotary, grouped KV) with the bundled
    tokenizer, saved as safetensors to a temp dir."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    from backend.models import _bundled_tokenizer

    tokenizer = _bundled_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        eos_token_id=None,
    )
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
