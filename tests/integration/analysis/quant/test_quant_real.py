"""benchmarks/quant_real.py on a hybrid family, as far as it runs without llm-compressor (not
installed here: it pins an older transformers): isoscope's side (scan, recipe, held-out
prediction, calibration set) on a tiny random Qwen3.5 causal LM, and the block swap the per-block
measurement uses, read through the block list isoscope finds in any family."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]


def _benchmark():
    spec = importlib.util.spec_from_file_location(
        "quant_real", ROOT / "benchmarks" / "quant_real.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_on_a_hybrid_family(capsys):
    bench = _benchmark()
    bench.main(
        [
            "--family",
            "qwen3_5_text",
            "--dry-run",
            "--texts",
            "4",
            "--held-out",
            "2",
            "--max-length",
            "16",
            "--end-tokens",
            "24",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "qwen3_5_text" and out["calibration_texts"] == 4
    assert out["mappings"] > 0 and out["sites_not_smoothed"] > 0
    assert "linear_attn.in_proj_qkv" in out["recipe_yaml"]  # a Gated DeltaNet input, smoothed
    assert all(v >= 0 for v in out["predicted"].values() if isinstance(v, float))


def test_a_block_swap_goes_through_the_found_block_list(tmp_path):
    from transformers import AutoModelForCausalLM

    bench = _benchmark()
    folder = bench.family_checkpoint("qwen3_5_text", tmp_path / "hybrid")
    a = AutoModelForCausalLM.from_pretrained(folder)
    b = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        b.model.layers[0].linear_attn.out_proj.weight.mul_(2.0)
    ids = torch.tensor([[3, 4, 5, 6]])
    before = a(input_ids=ids).logits
    original = bench.swap_block(a, b, 0)
    assert a.model.layers[0] is b.model.layers[0]
    assert not torch.allclose(a(input_ids=ids).logits, before)
    bench.swap_block_back(a, original, 0)
    assert a.model.layers[0] is original
    torch.testing.assert_close(a(input_ids=ids).logits, before)
