"""Queries and keys of families that compute softmax attention in their own code (tests/own_attention.py),
through the real loader: ``qk`` analyses every one of them, the statistics equal an independent
computation from the modules' weights, the entropy is under the model's own mask (GPT-Neo's local
window, Falcon's causal SDPA call), and queries/keys before a rotary embedding the module applies
itself are refused in one line unless a projection layout reaches them."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr

import numpy as np
import pytest
import torch

from isoscope.analysis.positional.qk import qk_stats
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.load.models import load_model
from tests import own_attention

TEXTS = ["the cat sat on the w3 . w7 w9", "a dog , the w1 w2", "w11 w12 w13 the cat on a dog ; w20"]


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qk-own-attention")
    return {f: own_attention.build(f, root / f) for f in own_attention.FAMILIES}


def _lengths(loaded, texts) -> list[int]:
    return [len(loaded.tokenizer(t, truncation=True, max_length=64)["input_ids"]) for t in texts]


@pytest.mark.parametrize("family", list(own_attention.FAMILIES))
def test_every_own_code_family_is_analysed(family, family_dirs):
    loaded = load_model(str(family_dirs[family]), device="cpu")
    stats = qk_stats(loaded, TEXTS)
    assert stats.cos_qk.shape == (2, 4) and "scores" in stats.capture
    assert stats.num_tokens == sum(_lengths(loaded, TEXTS))
    assert np.all(stats.entropy_norm > 0) and np.all(
        stats.entropy_norm <= 1 + 1e-6
    )  # float32 weights
    expected_kv = [0, 0, 0, 0] if family == "falcon" else [0, 1, 2, 3]  # Falcon: multi-query
    assert stats.kv_head.tolist() == expected_kv
    assert stats.rotation == (
        "applied" if family in own_attention.ROTARY else "no rotary positions"
    )


@pytest.mark.parametrize("family", ["gpt_neo", "bloom", "mpt"])
def test_statistics_equal_a_recomputation_from_the_weights(family, family_dirs):
    loaded = load_model(str(family_dirs[family]), device="cpu")
    stats = qk_stats(loaded, TEXTS)
    enc = loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)
    base = loaded.encoder
    with torch.inference_mode():
        hidden = base(**enc, output_hidden_states=True).hidden_states
    valid = enc["attention_mask"].bool()
    blocks = base.blocks if family == "mpt" else base.h
    for i, block in enumerate(blocks):
        with torch.inference_mode():
            if family == "gpt_neo":
                x = block.ln_1(hidden[i])
                q, k = block.attn.attention.q_proj(x), block.attn.attention.k_proj(x)
            elif family == "bloom":
                fused = block.self_attention.query_key_value(block.input_layernorm(hidden[i]))
                fused = fused.view(*fused.shape[:2], 4, 3, 16)  # per head q | k | v
                q, k = fused[..., 0, :], fused[..., 1, :]
            else:
                q, k, _ = block.attn.Wqkv(block.norm_1(hidden[i])).chunk(3, dim=-1)
        mean_q = q[valid].double().reshape(-1, 4, 16).mean(0)
        mean_k = k[valid].double().reshape(-1, 4, 16).mean(0)
        np.testing.assert_allclose(stats.mean_q_norm[i], mean_q.norm(dim=-1), rtol=1e-4)
        np.testing.assert_allclose(stats.mean_k_norm[i], mean_k.norm(dim=-1), rtol=1e-4)
        cos = torch.nn.functional.cosine_similarity(mean_q, mean_k, dim=-1)
        np.testing.assert_allclose(stats.cos_qk[i], cos, rtol=1e-4, atol=1e-7)


def _zero_queries(loaded, family) -> None:
    with torch.no_grad():
        if family == "gpt_neo":
            for block in loaded.encoder.h:
                block.attn.attention.q_proj.weight.zero_()
        else:  # Falcon multi-query: the fused projection holds 4 query heads, then k, then v
            for block in loaded.encoder.h:
                block.self_attention.query_key_value.weight[: 4 * 16].zero_()


@pytest.mark.parametrize("family", ["gpt_neo", "falcon"])
def test_zero_queries_attend_uniformly_over_the_keys_the_models_mask_allows(family, family_dirs):
    """Zero queries give uniform attention over the visible keys: the entropy is the mean of
    log(number of keys), min(m + 1, 4) at position m in GPT-Neo's local layer, m + 1 in a
    global causal layer (Falcon's SDPA call is causal without a causal mask tensor)."""
    loaded = load_model(str(family_dirs[family]), device="cpu")
    _zero_queries(loaded, family)
    stats = qk_stats(loaded, TEXTS)
    positions = np.concatenate([np.arange(n) for n in _lengths(loaded, TEXTS)])
    global_entropy = np.log(positions + 1).mean()
    np.testing.assert_allclose(stats.entropy[0], global_entropy, rtol=1e-6)
    window = np.log(np.minimum(positions + 1, 4)).mean() if family == "gpt_neo" else global_entropy
    np.testing.assert_allclose(stats.entropy[1], window, rtol=1e-6)


@pytest.mark.parametrize("family", ["gptj", "codegen"])
def test_before_rotation_is_refused_in_one_line_where_the_module_rotates_itself(
    family, family_dirs, tmp_path
):
    loaded = load_model(str(family_dirs[family]), device="cpu")
    with pytest.raises(UnsupportedModelError, match="rotation 'applied'"):
        qk_stats(loaded, TEXTS, rotation="before")
    from isoscope.cli import main

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    common = ["qk", "--model", str(family_dirs[family]), "--texts", str(texts), "--device", "cpu"]
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main([*common, "--rotation", "before", "--out", str(tmp_path / "b.json")])
    errors = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    assert rc == 2 and len(errors) == 1 and "rotates its queries and keys" in errors[0]
    assert "Traceback" not in err.getvalue()
    with redirect_stderr(io.StringIO()):
        rc = main([*common, "--out", str(tmp_path / "a.json")])
    assert rc == 0
    heads = json.loads((tmp_path / "a.json").read_text())["heads"]
    assert len(heads) == 2 * 4 and {h["layer"] for h in heads} == {1, 2}
