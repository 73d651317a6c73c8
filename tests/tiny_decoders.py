"""One builder for the tiny random decoder checkpoints the tests save: width 32, 4 heads (2 KV
heads), the bundled tokenizer, seed 0; each fixture passes only what differs."""

from __future__ import annotations

from pathlib import Path


def save_tiny_decoder(tmp_path_factory, name: str, config_cls, model_cls, **overrides) -> Path:
    """A random ``model_cls(config_cls(...))`` saved as safetensors with the bundled tokenizer."""
    import torch

    from isoscope.engine.load.models import bundled_tokenizer

    tokenizer = bundled_tokenizer()
    torch.manual_seed(0)
    config = config_cls(
        **{
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 256,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": None,
            "eos_token_id": None,
            **overrides,
        }
    )
    folder = tmp_path_factory.mktemp(name)
    model_cls(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
