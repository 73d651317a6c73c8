"""The extraction package: its seams (one module per stage, re-exported by the package); the stages
themselves: tests/unit/engine/extraction/."""

from __future__ import annotations

import importlib

import pytest

import isoscope.engine.extraction as extraction

STAGES = ("types", "tokenization", "sample", "partial", "forward", "batches")


@pytest.mark.parametrize("name", extraction.__all__)
def test_every_public_name_is_defined_in_a_stage_module(name):
    obj = getattr(extraction, name)
    home = getattr(obj, "__module__", "") or ""
    if home.startswith("backend."):  # functions and classes: their own module says where
        assert home in {f"isoscope.engine.extraction.{m}" for m in STAGES}, (name, home)
        assert getattr(importlib.import_module(home), name) is obj
        return
    owners = [
        m
        for m in STAGES
        if getattr(importlib.import_module(f"isoscope.engine.extraction.{m}"), name, None) is obj
    ]
    assert owners, name


def test_stage_modules_do_not_shadow_the_functions_they_export():
    """``extraction.tokenize`` is the function, not a submodule of the same name."""
    assert callable(extraction.tokenize) and extraction.tokenize.__name__ == "tokenize"
