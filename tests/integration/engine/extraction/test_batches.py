"""Single texts and mean-pooled batches (encode_text, mean_pooled) on tiny random models."""

from __future__ import annotations

import numpy as np
import torch

from isoscope.engine.extraction import (
    encode_text,
    mean_pooled,
)
from tests.extraction_checks import TEXTS


def test_hidden_state_zero_is_the_embedding_output(tiny):
    hidden, table = encode_text(tiny, TEXTS[0])
    ids = torch.tensor([tiny.tokenizer(TEXTS[0])["input_ids"]])
    enc = tiny.encoder
    with torch.inference_mode():
        if tiny.info.model_type == "bert":
            expected = enc.embeddings(input_ids=ids)
        else:
            expected = enc.wte(ids) + enc.wpe(torch.arange(ids.shape[1])[None])
    np.testing.assert_allclose(hidden[0], expected[0].numpy(), atol=1e-6)
    assert hidden.shape == (tiny.info.num_layers + 1, ids.shape[1], tiny.info.hidden_size)
    assert table.token.tolist() == tiny.tokenizer.convert_ids_to_tokens(ids[0].tolist())


def test_mean_pooled_matches_per_text_mean(tiny):
    pooled = mean_pooled(tiny, TEXTS[:3], batch_size=2)
    for i, text in enumerate(TEXTS[:3]):
        hidden, _ = encode_text(tiny, text)
        np.testing.assert_allclose(pooled[:, i], hidden.astype(np.float64).mean(axis=1), atol=1e-5)
