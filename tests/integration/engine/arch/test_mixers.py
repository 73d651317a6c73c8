"""The layer pattern read from the model, against each config's own statement of it: every family
of the second zoo (tests/zoo_recent.py, built in memory: the pattern needs no weights on disk) and
plain attention everywhere on first-zoo families loaded through the real loader (decoder, encoder,
an encoder-decoder's encoder, modeling files with their own attention code)."""

from __future__ import annotations

import pytest

from isoscope.engine.arch import layer_pattern, pattern_sentence
from tests import zoo, zoo_recent

# each config's own name for a layer kind -> isoscope's label
_CONFIG_KIND = {
    "recurrent_gemma": {
        "linear_attention": "RG-LRU",
        "sliding_attention": "sliding-window attention",
    },
    "jamba": {"linear_attention": "Mamba", "full_attention": "full attention"},
    "bamba": {"linear_attention": "Mamba-2", "full_attention": "full attention"},
    "granitemoehybrid": {"linear_attention": "Mamba-2", "full_attention": "full attention"},
    "nemotron_h": {
        "linear_attention": "Mamba-2",
        "full_attention": "full attention",
        "mlp": "MLP only",
    },
    "zamba2": {"linear_attention": "Mamba-2", "hybrid": "shared attention block + Mamba-2"},
    "qwen3_next": {"linear_attention": "Gated DeltaNet", "full_attention": "full attention"},
    "qwen3_5_text": {"linear_attention": "Gated DeltaNet", "full_attention": "full attention"},
    "lfm2": {"conv": "short convolution", "full_attention": "full attention"},
    "lfm2_moe": {"conv": "short convolution", "full_attention": "full attention"},
    "minimax": {"linear_attention": "linear attention", "full_attention": "full attention"},
    "olmo3": {"sliding_attention": "sliding-window attention", "full_attention": "full attention"},
    "gemma3n_text": {
        "sliding_attention": "sliding-window attention",
        "full_attention": "full attention",
    },
}
# families whose every layer has one kind
_UNIFORM = {
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "rwkv": "RWKV",
    "falcon_h1": "Mamba-2 + full attention in parallel",
    "deepseek_v2": "latent attention (MLA)",
    "deepseek_v3": "latent attention (MLA)",
    "ministral3": "sliding-window attention",  # its config's sliding_window, given to every call
    **dict.fromkeys(("glm4_moe", "hunyuan_v1_moe", "dots1", "ernie4_5_moe"), "full attention"),
}


def _expected(family: str, config) -> list[str]:
    if family in _UNIFORM:
        return [_UNIFORM[family]] * config.num_hidden_layers
    if family == "kimi_linear":
        linear = config.linear_attn_config["kda_layers"]  # 1-based
        return [
            "linear attention" if i + 1 in linear else "latent attention (MLA)"
            for i in range(config.num_hidden_layers)
        ]
    return [_CONFIG_KIND[family][t] for t in config.layer_types]


@pytest.mark.parametrize("family", list(zoo_recent.FAMILIES))
def test_second_zoo_pattern_matches_its_config(family):
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    config = zoo_recent.config_of(family)
    model = AutoModel.from_config(config).eval()
    pattern = layer_pattern(model)
    assert [k.label for k in pattern.layers] == _expected(family, config)
    assert pattern.streams == (config.altup_num_inputs if family == "gemma3n_text" else 1)
    softmax = (
        "full attention",
        "sliding-window attention",
        "latent attention (MLA)",
        "shared attention block",
    )
    expected = _expected(family, config)
    assert pattern.attention_layers() == tuple(
        i + 1 for i, label in enumerate(expected) if any(k in label for k in softmax)
    )
    if family in zoo_recent.NO_ATTENTION:
        assert (
            pattern.no_attention_reason() == f"no attention layers: {_UNIFORM[family]} mixers only"
        )
    assert pattern_sentence(pattern).startswith(f"{config.num_hidden_layers} layers: ")


def test_sentences_of_the_examples():
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    sentences = {
        f: pattern_sentence(layer_pattern(AutoModel.from_config(zoo_recent.config_of(f)).eval()))
        for f in ("qwen3_5_text", "zamba2", "gemma3n_text")
    }
    assert sentences["qwen3_5_text"] == "4 layers: 2 Gated DeltaNet, 2 full attention"
    assert sentences["zamba2"] == "4 layers: 2 Mamba-2, 2 shared attention block + Mamba-2"
    assert sentences["gemma3n_text"].endswith("; AltUp x 4 streams")


FIRST_ZOO = ("llama", "gpt2", "bloom", "mpt", "bert", "deberta-v2", "mpnet", "t5", "bart")


@pytest.mark.parametrize("family", FIRST_ZOO)
def test_first_zoo_is_attention_everywhere(family, tmp_path):
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(zoo.build(family, tmp_path / family)), device="cpu")
    pattern = layer_pattern(loaded)
    assert [k.label for k in pattern.layers] == ["full attention"] * len(pattern.layers)
    assert pattern.attention_layers() == tuple(range(1, len(pattern.layers) + 1))
    assert pattern.streams == 1
