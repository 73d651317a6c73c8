"""The family table (isoscope.engine.arch.families): a family matches by layout, not by name."""

from __future__ import annotations

import torch

from isoscope.engine.arch.families import FAMILIES, family_of, supported_families
from tests.arch_models import tiny


def test_a_family_matches_by_its_paths_not_its_name():
    gpt2 = tiny("GPT2")
    assert family_of(gpt2).name == "GPT-2"
    gpt2.config.model_type = "renamed"  # the name plays no part
    assert family_of(gpt2).name == "GPT-2"
    assert family_of(torch.nn.Linear(2, 2)) is None


def test_the_error_list_names_every_family_once():
    listed = supported_families().split(", ")
    assert listed == [f.name for f in FAMILIES] and len(set(listed)) == len(FAMILIES)
