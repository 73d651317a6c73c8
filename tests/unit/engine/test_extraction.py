"""The extraction package: its seams (one module per stage, re-exported by the package) and the one
padding helper every forward pass over token ids uses."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import backend.engine.extraction as extraction
from backend.engine.extraction import TokenizedCorpus, pad_batch

STAGES = ("types", "tokenization", "sample", "partial", "forward", "batches")


@pytest.mark.parametrize("name", extraction.__all__)
def test_every_public_name_is_defined_in_a_stage_module(name):
    obj = getattr(extraction, name)
    home = getattr(obj, "__module__", "") or ""
    if home.startswith("backend."):  # functions and classes: their own module says where
        assert home in {f"backend.engine.extraction.{m}" for m in STAGES}, (name, home)
        assert getattr(importlib.import_module(home), name) is obj
        return
    owners = [
        m
        for m in STAGES
        if getattr(importlib.import_module(f"backend.engine.extraction.{m}"), name, None) is obj
    ]
    assert owners, name


def test_stage_modules_do_not_shadow_the_functions_they_export():
    """``extraction.tokenize`` is the function, not a submodule of the same name."""
    assert callable(extraction.tokenize) and extraction.tokenize.__name__ == "tokenize"


def _tokenized(*lengths: int) -> TokenizedCorpus:
    ids = [np.arange(1, n + 1, dtype=np.int64) for n in lengths]
    special = [np.zeros(n, dtype=bool) for n in lengths]
    words = [np.arange(n, dtype=np.int32) for n in lengths]
    return TokenizedCorpus(ids, special, words, 0, max(lengths))


def test_pad_batch_right_pads_the_chosen_texts_with_the_pad_id():
    tokenized = _tokenized(3, 1, 2)
    ids, mask = pad_batch(tokenized, np.array([2, 1]), pad_id=-7)
    np.testing.assert_array_equal(ids, [[1, 2], [1, -7]])
    np.testing.assert_array_equal(mask, [[1, 1], [1, 0]])
    assert ids.dtype == mask.dtype == np.int64


def test_pad_batch_of_no_texts_is_empty():
    ids, mask = pad_batch(_tokenized(2), np.array([], dtype=np.int64), pad_id=0)
    assert ids.shape == mask.shape == (0, 0)
