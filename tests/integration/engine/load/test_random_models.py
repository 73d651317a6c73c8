"""The random: factory (isoscope.engine.load.random_models) through the loader: families with and
without position tables, seeds, sizes and the errors of a bad option."""

from __future__ import annotations

import pytest
import torch

from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.models import load_model, position_table

SMALL = "layers=1,width=16,heads=2"


@pytest.mark.parametrize(
    ("family", "causal", "has_table"),
    [
        ("bert", False, True),
        ("bert-nope", False, False),
        ("gpt2", True, True),
        ("gpt2-nope", True, False),
    ],
)
def test_random_families(family, causal, has_table):
    loaded = load_model(f"random:{family}:{SMALL},seed=3", device="cpu")
    info = loaded.info
    assert info.random_init and info.is_causal == causal
    assert (info.num_layers, info.hidden_size, info.num_heads) == (1, 16, 2)
    assert info.source == f"random:{family}:layers=1,width=16,heads=2,seed=3"
    table = position_table(loaded)
    assert (table is not None) == has_table
    if not has_table:
        raw = (
            loaded.encoder.embeddings.position_embeddings
            if family.startswith("bert")
            else loaded.encoder.wpe
        )
        assert torch.count_nonzero(raw.weight) == 0 and not raw.weight.requires_grad
        assert info.position_embedding.startswith("none")


def test_random_models_are_seeded():
    a = load_model(f"random:bert:{SMALL},seed=1", device="cpu").model.state_dict()
    b = load_model(f"random:bert:{SMALL},seed=1", device="cpu").model.state_dict()
    c = load_model(f"random:bert:{SMALL},seed=2", device="cpu").model.state_dict()
    key = "embeddings.word_embeddings.weight"
    assert torch.equal(a[key], b[key]) and not torch.equal(a[key], c[key])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("random:transformer", "unknown random model family"),
        ("random:bert:depth=3", "bad random-model option"),
        ("random:bert:layers=two", "needs a number"),
        ("random:bert:width=30,heads=4", "divisible"),
        ("random:gpt2:layers=1,width=16,heads=2", None),
    ],
)
def test_random_source_errors(source, message):
    if message is None:
        with pytest.raises(ModelLoadError, match="no masked-LM head"):
            load_model(source, device="cpu", head="mlm")
        return
    with pytest.raises(ModelLoadError, match=message):
        load_model(source, device="cpu")


def test_read_random_fingerprints_the_canonical_source_and_head():
    from isoscope.engine.load.random_models import read_random
    from isoscope.engine.load.source import parse_source

    a = read_random(parse_source(f"random:bert:{SMALL}"), head="base")
    again = read_random(parse_source("random:bert:heads=2,width=16,layers=1"), head="base")
    mlm = read_random(parse_source(f"random:bert:{SMALL}"), head="mlm")
    assert a.random and a.weights_dir is None and a.spec == {"source": a.source, "head": "base"}
    assert a.fingerprint == again.fingerprint != mlm.fingerprint
    assert type(mlm.model).__name__ == "BertForMaskedLM"
