"""The module-scoped corpus and tiny models (BERT and GPT-2) the extraction tests run on."""

from __future__ import annotations

import pytest

from backend.engine.inputs.corpus import Corpus
from backend.engine.load.models import load_model
from tests.extraction_checks import TEXTS


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus(TEXTS, "test texts")


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def tiny(request, tiny_bert_dir, tiny_gpt2_dir):
    folder = tiny_bert_dir if request.param == "bert" else tiny_gpt2_dir
    return load_model(str(folder), device="cpu")
