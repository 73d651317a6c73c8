"""isoscope.engine.load.weight_check on names alone: which wrapper prefix is stripped, the card's
line, and the one-line refusal."""

from __future__ import annotations

import re

import pytest
import torch

from isoscope.engine.load.weight_check import (
    WeightsCheck,
    key_mapping,
    not_loaded,
    refusal,
    report_of,
    wrapper_prefix,
)


@pytest.mark.parametrize(
    ("unexpected", "prefix"),
    [
        (["module.a.weight", "module.b.bias"], "module."),
        (["model.a.weight", "model.b.bias"], "model."),
        (["_orig_mod.a.weight"], "_orig_mod."),
        (["module._orig_mod.a", "module._orig_mod.b"], "module._orig_mod."),
        (["model.model.layers.0.w", "model.lm_head.weight"], "model."),  # the longest shared
        (["module.a", "b"], ""),  # not every name: not a wrapper
        (["blocks.0.w", "blocks.1.w"], ""),  # a rename, not a wrapper
        (["modules.a"], ""),  # whole components only
        ([], ""),
    ],
)
def test_only_a_chain_of_wrapper_prefixes_every_unexpected_key_shares_is_stripped(
    unexpected, prefix
):
    assert wrapper_prefix(unexpected) == prefix


@pytest.mark.parametrize("prefix", ["module.", "model.", "_orig_mod.", "module._orig_mod."])
def test_the_key_mapping_strips_the_prefix_at_the_start_only(prefix):
    ((pattern, replacement),) = key_mapping(prefix).items()
    assert re.sub(pattern, replacement, prefix + "a.module.b") == "a.module.b"
    assert re.sub(pattern, replacement, "x." + prefix + "a") == "x." + prefix + "a"


def test_the_card_line_says_what_was_measured():
    assert WeightsCheck(39).label() == "trained (all 39 tensors from the checkpoint)"
    mapped = WeightsCheck(39, stripped="module.").label()
    assert (
        mapped
        == "trained (all 39 tensors from the checkpoint; keys mapped: stripped prefix 'module.')"
    )
    partial = WeightsCheck(39, unread=("pooler.dense.bias", "pooler.dense.weight")).label()
    assert partial.startswith("trained (37 of 39 tensors from the checkpoint; 2 that no hidden")
    assert partial.endswith("pooler.dense.bias, pooler.dense.weight)")
    many = WeightsCheck(50, unread=tuple(f"decoder.{i}" for i in range(5))).label()
    assert "decoder.0, decoder.1, ..." in many and "decoder.4" not in many


def test_the_report_reads_sets_lists_and_empty():
    report = report_of(
        {"missing_keys": ["a"], "mismatched_keys": {("b", (1,), (2,))}, "unexpected_keys": None}
    )
    assert not_loaded(report) == {"a", "b"} and report["unexpected_keys"] == set()
    assert report_of(None) == {
        "missing_keys": set(),
        "unexpected_keys": set(),
        "mismatched_keys": [],
        "error_msgs": [],
    }


def test_the_refusal_is_one_line_with_counts_and_examples_of_both_sides():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))  # 4 tensors
    report = report_of(
        {
            "missing_keys": {"0.weight", "0.bias", "1.weight"},
            "unexpected_keys": {"blocks.0.weight", "blocks.0.bias"},
            "mismatched_keys": {("1.bias", (3,), (2,))},
        }
    )
    read = not_loaded(report)
    message = str(refusal("ckpt", model, report, read))
    assert "\n" not in message
    assert message.startswith("'ckpt': 3 of 4 weights Sequential expects are not in the checkpoint")
    assert "(e.g. 0.bias, 0.weight)" in message
    assert "1 have another shape there (e.g. 1.bias: 3 in the checkpoint, 2 in the model" in message
    assert "the checkpoint has names isoscope does not map (e.g. blocks.0.bias" in message
    after = str(refusal("ckpt", model, report, {"0.weight"}, stripped="module."))
    assert "1 of 4 weights" in after and "after stripping the prefix 'module.'" in after
