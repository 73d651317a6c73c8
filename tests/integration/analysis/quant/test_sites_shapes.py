"""Every projection the forward calls on the tokens is a quantization site or a named exclusion,
through the real loader (backend/analysis/quant/sites.py): a layer kept as parallel lists (XLM's
attentions[i] + ffns[i]), stacked feed-forward blocks that every token runs (MobileBERT's ffn
list, not routed experts), a router that subclasses nn.Linear but returns a tuple (PhiMoE: no
site, a note, and the quant command runs), 1-D convolutions of kernel one (SqueezeBERT: refused
in one line naming them) and projections outside the layers (MobileBERT's embedding
transformation: a note)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr

import pytest
import torch

from isoscope.analysis.quant.sites import discover_sites, is_projection
from isoscope.engine.errors import UnsupportedModelError
from isoscope.engine.load.models import load_model
from tests import own_attention
from tests.zoo import H, L, V, W

CONFIGS = {
    "xlm": own_attention.FAMILIES["xlm"],
    "squeezebert": own_attention.FAMILIES["squeezebert"],
    "phimoe": (
        "PhimoeConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            num_key_value_heads=2,
            intermediate_size=128,
            num_local_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=128,
        ),
    ),
    "mobilebert": (
        "MobileBertConfig",
        dict(
            vocab_size=V,
            hidden_size=W,
            num_hidden_layers=L,
            num_attention_heads=H,
            intermediate_size=128,
            embedding_size=32,
            intra_bottleneck_size=32,
            true_hidden_size=32,
            num_feedforward_networks=3,
            max_position_embeddings=128,
            pad_token_id=0,
        ),
    ),
}
TEXTS = ["the cat sat on the w3 . w7 w9", "a dog , the w1 w2", "w11 w12 w13 the cat on a dog ; w20"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("site-shapes")
    return {f: own_attention.build_config(*c, root / f) for f, c in CONFIGS.items()}


def _site_modules(site_map) -> set[str]:
    return {p for s in site_map.sites for p in s.paths}


def test_parallel_lists_give_every_layer_its_feed_forward_sites(dirs):
    loaded = load_model(str(dirs["xlm"]), device="cpu")
    sites = discover_sites(loaded).sites
    for i in range(L):
        roles = {s.role: s for s in sites if s.layer == i}
        assert set(roles) == {"attn_in", "attn_out", "mlp_in", "mlp_out"}
        assert roles["mlp_in"].paths == (f"ffns.{i}.lin1",)
        assert roles["mlp_in"].norm == f"layer_norm1.{i}"
        assert roles["mlp_out"].paths == (f"ffns.{i}.lin2",) and roles["mlp_out"].width == 4 * W
    linears = {n for n, m in loaded.encoder.named_modules() if isinstance(m, torch.nn.Linear)}
    assert linears == _site_modules(discover_sites(loaded))


def test_stacked_feed_forward_blocks_are_sites_not_experts(dirs):
    loaded = load_model(str(dirs["mobilebert"]), device="cpu")
    site_map = discover_sites(loaded)
    assert not any("expert" in note for note in site_map.notes)
    stacked = {n for n, m in loaded.encoder.named_modules() if ".ffn." in n and is_projection(m)}
    assert len(stacked) == L * 2 * 2 and stacked <= _site_modules(site_map)
    assert any(
        "outside the layers" in n and "embedding_transformation" in n for n in site_map.notes
    )


def test_a_router_returning_a_tuple_is_a_named_exclusion(dirs, tmp_path):
    loaded = load_model(str(dirs["phimoe"]), device="cpu")
    site_map = discover_sites(loaded)
    assert not any("router" in p for p in _site_modules(site_map))
    assert any("return a tuple" in n and "mlp.router" in n for n in site_map.notes)
    from isoscope.cli import main

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(
            ["quant", "--model", str(dirs["phimoe"]), "--texts", str(texts), "--device", "cpu"]
            + ["--out", str(tmp_path / "q.json")]
        )
    assert rc == 0 and "internal error" not in err.getvalue()
    written = json.loads((tmp_path / "q.json").read_text())
    assert all("router" not in m for s in written["sites"] for m in s.get("modules", []))


def test_kernel_one_convolutions_are_refused_in_one_line_naming_them(dirs):
    loaded = load_model(str(dirs["squeezebert"]), device="cpu")
    with pytest.raises(UnsupportedModelError, match="1-D convolutions of kernel one") as info:
        discover_sites(loaded)
    assert "\n" not in str(info.value)
