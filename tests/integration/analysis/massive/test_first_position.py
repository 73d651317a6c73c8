"""The first position's share of anisotropy and of the largest |mean|
(backend/analysis/massive/first_position.py), on a tiny random Llama whose first token is planted."""

from __future__ import annotations

import pytest
import torch

from isoscope.analysis.massive.first_position import first_position_contrast
from isoscope.engine.errors import InputError
from isoscope.engine.extraction import ExtractionSettings, extract, tokenize
from isoscope.engine.inputs.corpus import corpus_from_text
from tests.integration.analysis.massive.helpers import TEXTS


def test_first_position_contrast_on_a_planted_first_token(llama):
    first_id = int(tokenize(llama, TEXTS, 32).input_ids[0][0])
    with torch.no_grad():
        llama.encoder.embed_tokens.weight[first_id, 5] = 500.0
    corpus = corpus_from_text("\n".join(TEXTS))
    result = extract(llama, corpus, ExtractionSettings(max_length=32, sample_size=1000))
    contrast = first_position_contrast(result)
    assert contrast.n_first == len(corpus.texts)
    assert contrast.max_abs_mean_with[0] > 10 * contrast.max_abs_mean_without[0]
    # first tokens of different texts are identical vectors: they pull the mean cosine up
    assert contrast.anisotropy_with[0] > contrast.anisotropy_without[0]
    excluded = extract(
        llama, corpus, ExtractionSettings(max_length=32, sample_size=1000, exclude_first=True)
    )
    with pytest.raises(InputError, match="first-position"):
        first_position_contrast(excluded)
