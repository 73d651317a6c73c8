"""The model card's provenance: a result's card names what was opened; a different path (or
revision) than the one the statistics were computed from adds one reuse entry."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from isoscope.engine.store.provenance import REUSED_KEY, attribute, relabel_card, reuse_line
from tests.report_inputs import report_result

FIRST = {"source": "/a", "display_name": "/a", "path": "/abs/a", "num_layers": 2}
COPY = {"source": "/b", "display_name": "b", "path": "/abs/b", "num_layers": 2}


def test_the_opened_path_replaces_the_computed_one_with_one_reuse_entry():
    card = relabel_card(FIRST, COPY, "0123456789abcdef0123")
    assert {k: card[k] for k in ("source", "display_name", "path")} == {
        "source": "/b",
        "display_name": "b",
        "path": "/abs/b",
    }
    assert card["num_layers"] == 2  # everything else is the computed card's
    assert card[REUSED_KEY] == {
        "fingerprint": "0123456789abcdef0123",
        "source": "/a",
        "display_name": "/a",
        "path": "/abs/a",
        "revision": None,
    }
    assert reuse_line(card) == (
        "reused from an identical checkpoint, fingerprint 0123456789ab…, computed from /abs/a"
    )


def test_relabelling_is_idempotent_and_the_first_path_gets_its_card_back():
    copy = relabel_card(FIRST, COPY, "fp")
    assert relabel_card(copy, COPY, "fp") == copy
    back = relabel_card(copy, FIRST, "fp")
    assert back == FIRST and reuse_line(back) is None


def test_another_revision_at_the_same_path_is_a_reuse_and_an_old_card_compares_sources():
    pinned = relabel_card(FIRST, FIRST | {"revision": "abc123"}, "fp")
    assert reuse_line(pinned).endswith("computed from /abs/a")
    old = {"source": "/a", "display_name": "/a"}  # cached before cards had a path
    assert reuse_line(relabel_card(old, {"source": "/a", "display_name": "/a"}, "fp")) is None
    assert "computed from /a" in reuse_line(relabel_card(old, COPY, "fp"))


def test_attribute_keeps_the_arrays_and_returns_an_unchanged_result_itself():
    result = replace(report_result(np.ones((2, 10, 3)), np.zeros(10)), model=dict(FIRST))
    same = attribute(result, result.model)
    assert same is result
    moved = attribute(result, COPY)
    assert moved.model["path"] == "/abs/b" and moved.mean is result.mean


def test_only_a_named_file_or_folder_is_a_path(tmp_path):
    from isoscope.engine.load.models import opened_path

    assert opened_path(str(tmp_path)) == str(tmp_path.resolve())
    assert opened_path(f" {tmp_path / 'model.gguf'} ") == str((tmp_path / "model.gguf").resolve())
    # names: a shared server's card shows no path of the machine's files for them
    assert [opened_path(s) for s in ("default", "SmolLM2", "someorg/tiny-bert")] == [None] * 3
