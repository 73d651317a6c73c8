"""Shared-server rules: when shared mode is on, which model sources a visitor may load (and one
refusal text whatever exists), per-session limits, the rate limit and the passphrase check."""

from __future__ import annotations

import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.serve.access import (
    SOURCE_REFUSED,
    AccessPolicy,
    RateLimit,
    SessionLimits,
    is_loopback,
    passphrase_matches,
    shared_mode,
)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("0.0.0.0", False), ("", False), (None, False), ("192.168.1.5", False),
     ("myhost", False)],
)  # fmt: skip
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback


def test_shared_mode_follows_the_address_unless_the_environment_says():
    assert shared_mode("127.0.0.1", {}) is False
    assert shared_mode("0.0.0.0", {}) is True
    assert shared_mode("127.0.0.1", {"ISOSCOPE_SHARED": "1"}) is True
    assert shared_mode("0.0.0.0", {"ISOSCOPE_SHARED": "off"}) is False
    with pytest.raises(InputError, match="ISOSCOPE_SHARED"):
        shared_mode("127.0.0.1", {"ISOSCOPE_SHARED": "maybe"})


@pytest.fixture
def policy(tmp_path):
    allowed = tmp_path / "models"
    (allowed / "tiny").mkdir(parents=True)
    return AccessPolicy(shared=True, model_dirs=(allowed.resolve(),))


@pytest.mark.parametrize(
    "source",
    ["default", "smollm2", "random:bert", "random:gpt2:layers=2", "random-like:default"],
)
def test_presets_and_random_sources_are_allowed(policy, source):
    assert policy.check_model_source(source) == source


def test_folders_under_the_allow_list_are_allowed(policy):
    (root,) = policy.model_dirs
    assert policy.check_model_source(str(root / "tiny"))
    assert policy.check_model_source(f"random-like:{root / 'tiny'}")
    assert policy.check_model_source(str(root / "not-yet-there"))  # the operator's own folder


def test_a_typed_server_path_is_refused_with_one_text_whatever_exists(policy, tmp_path):
    existing_folder = tmp_path  # exists, outside the allow-list
    a_file = tmp_path / "secret.txt"
    a_file.write_text("x")
    messages = set()
    for source in [str(existing_folder), str(a_file), "/nonexistent/folder", "/etc", "/etc/passwd",
                   "../models", "random-like:/etc", "~/", "someorg/not-in-cache"]:  # fmt: skip
        with pytest.raises(InputError) as refused:
            policy.check_model_source(source)
        messages.add(str(refused.value))
    assert messages == {SOURCE_REFUSED}


def test_a_symlink_out_of_the_allow_list_is_refused(policy, tmp_path):
    (root,) = policy.model_dirs
    (root / "escape").symlink_to(tmp_path)
    with pytest.raises(InputError):
        policy.check_model_source(str(root / "escape"))


def test_a_cached_hub_id_is_allowed(policy, monkeypatch, tmp_path):
    import isoscope.engine.load.models as models

    monkeypatch.setattr(
        models, "local_hub_snapshot", lambda s: tmp_path if s == "org/cached" else None
    )
    assert policy.check_model_source("org/cached") == "org/cached"
    with pytest.raises(InputError):
        policy.check_model_source("org/other")


def test_a_local_server_allows_everything(tmp_path):
    local = AccessPolicy(shared=False)
    assert local.check_model_source(str(tmp_path)) == str(tmp_path)
    assert local.allow_pickle and local.server_paths
    shared = AccessPolicy(shared=True)
    assert not shared.allow_pickle and not shared.server_paths


def test_policy_from_the_environment(tmp_path):
    env = {
        "ISOSCOPE_MODEL_DIRS": f"{tmp_path}:{tmp_path / 'b'}",
        "ISOSCOPE_PASSPHRASE": "s3cret",
        "ISOSCOPE_MAX_TEXTS": "50",
    }
    policy = AccessPolicy.from_env("0.0.0.0", env)
    assert policy.shared and policy.passphrase == "s3cret"
    assert policy.model_dirs == (tmp_path.resolve(), (tmp_path / "b").resolve())
    assert policy.limits.max_texts == 50 and policy.limits.runs_per_minute == 6
    assert AccessPolicy.from_env("127.0.0.1", {}, secret_passphrase="x").passphrase == "x"
    with pytest.raises(InputError, match="ISOSCOPE_MAX_TEXTS"):
        SessionLimits.from_env({"ISOSCOPE_MAX_TEXTS": "many"})


def test_limits_name_themselves():
    limits = SessionLimits(max_upload_mb=1, max_texts=10)
    limits.check_upload("a.txt", 1024)
    with pytest.raises(InputError, match="upload limit"):
        limits.check_upload("a.txt", 2 * 1024 * 1024)
    limits.check_texts(10)
    with pytest.raises(InputError, match="text limit"):
        limits.check_texts(11)


def test_rate_limit_window():
    now = [0.0]
    limit = RateLimit(2, clock=lambda: now[0])
    limit.check("s1")
    limit.check("s1")
    limit.check("s2")  # per visitor
    with pytest.raises(InputError, match=r"2 heavy runs per minute .* try again in 60 s"):
        limit.check("s1")
    now[0] = 60.0
    limit.check("s1")


def test_passphrase_compare():
    assert passphrase_matches("s3cret", "s3cret")
    assert not passphrase_matches("s3cre", "s3cret")
    assert not passphrase_matches("", "s3cret")
    assert passphrase_matches("é", "é")


def test_hub_patterns_and_the_download_quota_come_from_the_environment():
    env = {"ISOSCOPE_HUB_ALLOW": "google/*, Qwen/Qwen3-*", "ISOSCOPE_HUB_QUOTA_GB": "2.5"}
    policy = AccessPolicy.from_env("0.0.0.0", env)
    assert policy.hub_allow == ("google/*", "Qwen/Qwen3-*")
    assert policy.hub_allowed("google/gemma-3-1b-it") and policy.hub_allowed("qwen/qwen3-0.6b")
    assert not policy.hub_allowed("Qwen/Qwen2-0.5B") and not policy.hub_allowed("evil/google")
    assert policy.check_model_source("google/gemma-3-1b-it@main") == "google/gemma-3-1b-it@main"
    assert policy.quota_bytes == 2_500_000_000
    assert AccessPolicy.from_env("127.0.0.1", env).quota_bytes is None  # a local server: no cap
