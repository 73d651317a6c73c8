"""The second zoo (tests/zoo_recent.py: state-space, recurrent, hybrid, linear-attention, MLA, MoE
and AltUp checkpoints of 2025-26, 4 layers, width 64), saved with a tokenizer and loaded through
the real loader. Per family, against the model's own forward pass (its ``hidden_states`` at the
stream its layers compute on; state L = its ``last_hidden_state``):

- the causal flag equals the definition (changing the last token moves no earlier position);
- the hidden states of one text equal the model's own;
- the discovered norm -> projection wiring holds (zeroing a norm zeroes what it is said to feed);
- the per-state means of the real extraction (what ``analyze`` computes) equal the means over
  per-text unpadded runs, within 1e-5, for batches of 1 text, of 4, and one batch of all texts
  (mixed lengths, most padding);
- the model card's layer pattern is the one read from the modules, and ``analyze`` (the CLI, in
  process) exits 0 with that card in its JSON and per-state means equal to the model's own;
- the padding rule: a right-padded batch gives every real position of every text the vectors of
  that text run alone, in every layer kind (no attention mask reaches an SSM or a convolution;
  right padding puts the pads after every real token, which a causal mixer never reads).
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr

import numpy as np
import pytest
import torch

from tests import zoo_recent
from tests.zoo_checks import wiring_errors

# mixed lengths, 2 to 13 tokens with the zoo's word-level tokenizer
TEXTS = [
    "the cat sat on the w3 . w7 w9",
    "a dog",
    "w11 w12 w13 the cat on a dog ; w20 w21 w22 w23 !",
    "the w4 .",
    "w5 w6 w7 w8 w9 w10",
    "dog",
]


@pytest.fixture(scope="session")
def recent_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo_recent")
    return {family: zoo_recent.build(family, root / family) for family in zoo_recent.FAMILIES}


def model_states(model, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The model's own (S, B, T, d) states, float64: ``hidden_states`` at the active AltUp stream
    (Gemma 3n keeps (streams, B, T, d); its config names the active one), the last replaced by
    ``last_hidden_state``. Written from the model's outputs, not from isoscope."""
    mask = torch.ones_like(ids) if mask is None else mask
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    active = int(getattr(model.config, "altup_active_idx", 0) or 0)
    states = [h[active] if h.ndim == 4 else h for h in out.hidden_states]
    states[-1] = out.last_hidden_state
    return torch.stack(states).double()


def causal_by_definition(model) -> bool:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (1, 9), generator=gen)
    other = ids.clone()
    other[0, -1] = 5 if int(ids[0, -1]) != 5 else 6
    a, b = model_states(model, ids), model_states(model, other)
    assert a.shape[2] == 9
    return bool(torch.allclose(a[:, :, :-1], b[:, :, :-1], atol=1e-5))


def per_text_means(loaded) -> np.ndarray:
    """Mean over every token of every text, each text run alone (no padding), per state."""
    total, count = None, 0
    for text in TEXTS:
        ids = loaded.tokenizer(text, return_tensors="pt")["input_ids"]
        states = model_states(loaded.model, ids)[:, 0]  # (S, T, d)
        total = states.sum(1) if total is None else total + states.sum(1)
        count += states.shape[1]
    return (total / count).numpy()


def analyze_cli(folder, tmp_path) -> tuple[int, str, dict]:
    """``analyze`` through the CLI entry point, in-process: (exit status, error line, JSON)."""
    from isoscope.cli import main

    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "a.json"
    err = io.StringIO()
    with redirect_stderr(err):
        rc = main(
            ["analyze", "--model", str(folder), "--texts", str(texts), "--out", str(out)]
            + ["--device", "cpu", "--max-length", "32", "--batch-size", "4", "--no-cache"]
            + ["--exclude-first", "off"]  # every token, as the truth counts them
        )
    lines = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    return rc, lines[0] if lines else "", json.loads(out.read_text()) if rc == 0 else {}


@pytest.mark.parametrize("family", list(zoo_recent.FAMILIES))
def test_recent_family_is_read_right(family, recent_dirs, tmp_path):
    from isoscope.engine.arch import layer_pattern, pattern_sentence
    from isoscope.engine.extraction import ExtractionSettings, encode_text, extract
    from isoscope.engine.inputs.corpus import corpus_from_text
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(recent_dirs[family]), device="cpu")
    model = loaded.model
    assert loaded.info.is_causal is True and causal_by_definition(model)
    assert loaded.info.layer_pattern == pattern_sentence(layer_pattern(model))
    assert loaded.info.layer_pattern.startswith("4 layers: ")

    ours, _ = encode_text(loaded, TEXTS[0], max_length=32)
    ids = loaded.tokenizer(TEXTS[0], return_tensors="pt")["input_ids"]
    assert np.abs(ours - model_states(model, ids)[:, 0].numpy()).max() < 1e-5

    assert wiring_errors(loaded) == []

    truth = per_text_means(loaded)
    corpus = corpus_from_text("\n".join(TEXTS))
    for batch_size in (1, 4, len(TEXTS)):
        settings = ExtractionSettings(max_length=32, batch_size=batch_size, sample_size=8)
        result = extract(loaded, corpus, settings)
        assert result.mean.shape == truth.shape
        assert np.abs(result.mean - truth).max() < 1e-5, f"batch size {batch_size}"

    rc, line, report = analyze_cli(recent_dirs[family], tmp_path)
    assert rc == 0, line
    assert report["model"]["layer_pattern"] == loaded.info.layer_pattern
    means = np.array([state["mean"] for state in report["layers"]])
    assert np.abs(means - truth).max() < 1e-5


@pytest.mark.parametrize(
    "family", ["mamba", "mamba2", "rwkv", "recurrent_gemma", "lfm2", "qwen3_5_text", "falcon_h1"]
)
def test_right_padding_leaves_real_positions_as_runs_alone(family, recent_dirs):
    """The padding rule for mixers without an attention mask: a right-padded batch equals the
    texts run one by one at every real position, in every state."""
    from isoscope.engine.extraction import forward_hidden_states, pad_rows, pad_token_id
    from isoscope.engine.load.models import load_model

    loaded = load_model(str(recent_dirs[family]), device="cpu")
    rows = [np.asarray(loaded.tokenizer(t)["input_ids"]) for t in TEXTS]
    ids, mask = pad_rows(rows, pad_token_id(loaded))
    assert (mask[:, 0] == 1).all() and not mask.all()  # right padding, some pads
    with torch.inference_mode():
        batch = torch.stack(forward_hidden_states(loaded, ids, mask)).double()
    for r, row in enumerate(rows):
        alone = model_states(loaded.model, torch.as_tensor(row)[None])[:, 0]
        assert (batch[:, r, : len(row)] - alone).abs().max() < 1e-5, TEXTS[r]
