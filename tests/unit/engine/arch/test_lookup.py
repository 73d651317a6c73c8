"""Finding modules inside a model (isoscope.engine.arch.lookup)."""

from __future__ import annotations

import pytest

from isoscope.engine.arch.lookup import base_of, blocks_of, describe, get_path, module_of, path_in
from tests.arch_models import tiny


@pytest.fixture(scope="module")
def bert():
    return tiny("Bert", "ForMaskedLM", num_hidden_layers=3)


def test_paths_blocks_and_base(bert):
    assert base_of(bert) is bert.bert
    path, blocks = blocks_of(bert)
    assert path == "bert.encoder.layer" and len(blocks) == 3
    assert get_path(bert.bert, "encoder.layer") is blocks
    assert get_path(bert.bert, "encoder.no_such") is None and get_path(bert, None) is None
    assert path_in(bert, blocks[1].attention) == "bert.encoder.layer.1.attention"
    assert describe(bert) == "BertForMaskedLM (bert)"


def test_a_loaded_model_is_unwrapped_and_a_foreign_module_is_refused(bert):
    class Loaded:
        model = bert

    assert module_of(Loaded()) is bert and module_of(bert) is bert
    with pytest.raises(KeyError, match="Linear is not part of this model"):
        path_in(bert, tiny("Bert").pooler.dense)
