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


@pytest.mark.parametrize(
    "revision",
    ["main", "v1.0", "refs/pr/1", "release/2024-01", "a" * 40, "0123456789abcdef" * 2 + "01234567"],
)
def test_branches_tags_and_commits_are_revisions(revision):
    parsed = parse_source(f"org/name@{revision}")
    assert (parsed.kind, parsed.revision) == ("hub", revision)


@pytest.mark.parametrize(
    "revision",
    [
        "/etc",
        "/some/folder",
        "../../x",
        "..",
        "a/../b",
        "a b",
        "main\x01",
        "tab\there",
        "back\\slash",
        "trailing/",
        "a//b",
        ".hidden",
        "x.lock",
        "ends.",
        "what?",
        "star*",
        "col:on",
        "br@{1}",
        "a" * 256,
    ],
)
@pytest.mark.parametrize("wrap", ["{}", "random-like:{}"])
def test_revisions_that_are_paths_or_not_ref_names_are_refused_before_any_lookup(revision, wrap):
    """Typed or as random-like: (Model B and links parse the same way): one line naming the rules."""
    with pytest.raises(ModelLoadError, match="is not a branch, tag or commit") as caught:
        parse_source(wrap.format(f"org/name@{revision}"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [
        ("layers", "nan", "an integer from 1 to 64"),
        ("layers", "inf", "an integer from 1 to 64"),
        ("layers", "-inf", "an integer from 1 to 64"),
        ("layers", "-1", "an integer from 1 to 64"),
        ("layers", "0", "an integer from 1 to 64"),
        ("layers", "2.5", "an integer from 1 to 64"),
        ("layers", "65", "an integer from 1 to 64"),
        ("width", "1e9", "an integer from 1 to 8,192"),
        ("heads", "1e400", "an integer from 1 to 128"),
        ("seed", "1e400", "an integer from 0 to 4,294,967,295"),
        ("seed", "99999999999999999999999999", "an integer from 0 to 4,294,967,295"),
        ("max_positions", "2000000000", "an integer from 1 to 65,536"),
        ("init_std", "nan", "a finite number from 0 to 1"),
        ("init_std", "inf", "a finite number from 0 to 1"),
        ("init_std", "-0.1", "a finite number from 0 to 1"),
    ],
)
def test_random_numbers_are_finite_integers_in_their_declared_range(option, value, accepted):
    with pytest.raises(ModelLoadError, match=f"option {option} needs a number: {accepted}"):
        parse_source(f"random:bert:{option}={value}")


def test_every_random_option_has_one_declared_range_and_its_bounds_parse():
    from isoscope.engine.load.source import RANDOM_KEYS, RANDOM_OPTIONS

    assert RANDOM_KEYS == tuple(RANDOM_OPTIONS)
    for name, declared in RANDOM_OPTIONS.items():
        for bound in (declared.low, declared.high):
            text = str(int(bound)) if declared.integer else str(bound)
            assert parse_source(f"random:bert:{name}={text}").option_dict[name] == bound
