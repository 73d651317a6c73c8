"""|h| of one text per hidden state, position and dim (backend/analysis/massive/magnitudes.py), on a
tiny random Llama whose first token carries a planted massive activation."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.massive.magnitudes import text_magnitudes
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import tokenize
from isoscope.engine.load.models import load_model


def test_planted_first_token_is_the_peak_of_its_position(tiny_llama_dir):
    llama = load_model(str(tiny_llama_dir), device="cpu")
    text = "Summer is warm. Winter is cold."
    first_id = int(tokenize(llama, [text], 32).input_ids[0][0])
    with torch.no_grad():
        llama.encoder.embed_tokens.weight[first_id, 5] = 500.0
    view = text_magnitudes(llama, text, max_length=32)
    assert view.state_names == ("emb", "1", "2")
    assert view.magnitude.shape[0] == 3 and view.magnitude.shape[2] == 32
    assert len(view.tokens) == view.magnitude.shape[1]
    assert view.peak_dim[0, 0] == 5 and view.peak[0, 0] == pytest.approx(500.0)
    assert view.top_dims(0, k=1) == [5]
    with pytest.raises(InputError, match="non-empty"):
        text_magnitudes(llama, "   ")
