"""The model-source grammar: one parse for every kind of source string."""

from __future__ import annotations

import pytest

from isoscope.engine.errors import ModelLoadError
from isoscope.engine.load.source import (
    PRESETS,
    RANDOM_FAMILIES,
    parse_source,
    random_like_source,
    random_source,
    source_label,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", ["default", "DEFAULT", " smollm2 "])
def test_presets(text):
    parsed = parse_source(text)
    assert parsed.kind == "preset" and parsed.text == text.strip().lower()
    assert parsed.is_gguf == (parsed.text == "smollm2")


def test_random_sources_are_canonical_and_carry_their_family():
    parsed = parse_source("Random:GPT2-nope:width=64, layers=2")
    assert parsed.kind == "random" and parsed.is_random
    assert parsed.text == "random:gpt2-nope:layers=2,width=64"
    assert parsed.family is RANDOM_FAMILIES["gpt2-nope"]
    assert parsed.family.causal and parsed.family.positions == "none"
    assert parsed.option_dict == {"layers": 2, "width": 64}
    assert parse_source(parsed.text) == parsed  # the canonical text parses to itself


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("random:lstm", "unknown random model family 'lstm'"),
        ("random:bert:depth=3", "bad random-model option 'depth=3'"),
        ("random:bert:layers=x", "needs a number"),
        ("random-like:", "needs the model to copy"),
        ("   ", "no model given"),
    ],
)
def test_malformed_sources_say_what_is_accepted(text, message):
    with pytest.raises(ModelLoadError, match=message):
        parse_source(text)


def test_random_like_nests_and_reaches_its_origin():
    parsed = parse_source("random-like:random:bert:seed=3")
    assert parsed.kind == "random-like" and parsed.base is not None
    assert parsed.origin.family is RANDOM_FAMILIES["bert"]
    assert parsed.causal_hint() is False
    assert random_like_source("random:bert:seed=3") == parsed.text
    assert random_like_source(parsed.text) == parsed.text  # not wrapped twice
    assert random_like_source("random:lstm") == "random-like:random:lstm"  # the load says why


@pytest.mark.parametrize(
    ("text", "repo", "revision"),
    [
        ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B", None),
        ("google/gemma-3-1b-it@main", "google/gemma-3-1b-it", "main"),
        ("org/name@refs/pr/1", "org/name", "refs/pr/1"),
        ("gpt2", "gpt2", None),
    ],
)
def test_hub_ids_with_revisions(text, repo, revision):
    parsed = parse_source(text)
    assert (parsed.kind, parsed.repo_id, parsed.revision) == ("hub", repo, revision)
    assert parsed.causal_hint() is None  # the config decides


def test_paths_gguf_files_and_existing_folders(tmp_path, monkeypatch):
    assert parse_source(str(tmp_path)).kind == "folder"
    assert parse_source("./not/here").kind == "folder"
    assert parse_source("a/b/c").kind == "folder"  # two slashes: not a Hub id
    gguf = parse_source("~/models/x.Q4.gguf")
    assert gguf.kind == "gguf" and gguf.is_gguf and gguf.causal_hint() is True
    (tmp_path / "org" / "name").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert parse_source("org/name").kind == "folder"  # an existing folder wins over a Hub id


def test_the_menu_labels_come_from_the_tables():
    assert source_label("default") == PRESETS["default"].label
    assert source_label(random_source("vit")) == RANDOM_FAMILIES["vit"].label
    assert source_label("random-like:default") == "random-init copy of the default model"
