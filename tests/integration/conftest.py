"""Integration-tier helpers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clirun import THREE_TEXTS, run_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def run_analyze():
    """``run_analyze(*args, cache_dir=...)``: ``isoscope analyze`` in a subprocess, as a user runs it."""

    def run(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
        return run_backend("analyze", *args, cache_dir=cache_dir, timeout=300)

    return run


@pytest.fixture(scope="session")
def three_texts(tmp_path_factory) -> Path:
    """A three-line text file, the corpus of the CLI tests."""
    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    path.write_text(THREE_TEXTS)
    return path


@pytest.fixture(scope="session")
def tiny_all(tiny_bert_dir):
    """A tiny BERT's extraction whose token sample holds every token (the in-memory reference)."""
    from isoscope.engine.extraction import ExtractionSettings, extract
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.load.models import load_model
    from tests.extraction_checks import TEXTS

    loaded = load_model(str(tiny_bert_dir), device="cpu")
    result = extract(loaded, Corpus(TEXTS, "test texts"), ExtractionSettings(sample_size=100_000))
    assert len(result.sample_index) == result.num_tokens
    return loaded, result
