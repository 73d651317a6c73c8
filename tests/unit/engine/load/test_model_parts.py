"""The typed hand-over between a loader and make_loaded (isoscope.engine.load.model_parts)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from isoscope.engine.load.model_parts import ModelParts, short_error


def test_parts_are_frozen_and_default_to_no_folder_or_provenance():
    parts = ModelParts(torch.nn.Linear(1, 1), None, "s", "d", "f", random=True)
    assert (parts.weights_dir, parts.path, parts.revision, parts.spec) == (None, None, None, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.source = "other"
    assert dataclasses.replace(parts, path="/p").path == "/p"


def test_short_error_keeps_the_first_line_only():
    assert short_error(ValueError("first line\nsecond")) == "first line"
    assert short_error(RuntimeError()) == "RuntimeError"
    assert len(short_error(ValueError("x" * 1000))) == 300
