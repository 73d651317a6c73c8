"""The module-scoped corpus and tiny models (BERT and GPT-2) the extraction tests run on, and the
uneven shards the Ray engine's tests read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from isoscope.engine.inputs.corpus import Corpus, bundled_corpus
from isoscope.engine.load.models import load_model
from tests.extraction_checks import TEXTS


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus(TEXTS, "test texts")


@pytest.fixture(scope="module", params=["bert", "gpt2"])
def tiny(request, tiny_bert_dir, tiny_gpt2_dir):
    folder = tiny_bert_dir if request.param == "bert" else tiny_gpt2_dir
    return load_model(str(folder), device="cpu")


@pytest.fixture
def uneven_shards(tmp_path) -> Path:
    """100 texts in Parquet shards of 7, 53, 1 and 29 texts, a JSONL shard of 10, an empty one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = bundled_corpus().texts[:100]
    folder = tmp_path / "shards"
    (folder / "more").mkdir(parents=True)
    for i, (a, b) in enumerate([(0, 7), (7, 60), (60, 61), (61, 90)]):
        pq.write_table(
            pa.table({"id": list(range(a, b)), "text": texts[a:b]}), folder / f"p{i}.parquet"
        )
    lines = [json.dumps({"text": t}) for t in texts[90:100]]
    (folder / "more" / "tail.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "more" / "zz-empty.txt").write_text("")
    return folder
