"""The process environment: offline Hugging Face libraries, the cache folder, the app folder."""

from __future__ import annotations

import os
from pathlib import Path

from isoscope.engine import environment as env


def test_offline_environment_keeps_the_users_values(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    env.use_offline_environment()
    assert os.environ["HF_HUB_OFFLINE"] == "0"  # the user's setting wins
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_the_runtime_environment_leaves_downloads_possible(monkeypatch):
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM"):
        monkeypatch.delenv(key, raising=False)
    env.use_runtime_environment()
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    assert env.runtime_env()["TOKENIZERS_PARALLELISM"] == "true"  # the user's value wins


def test_cache_dir_follows_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "c"))
    assert env.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("ISOSCOPE_CACHE_DIR")
    assert env.default_cache_dir().name == "isoscope"


def test_kernel_caches_sit_in_the_isoscope_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    env.use_kernel_caches()
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "numba")


def test_offline_env_for_a_child_process():
    child = env.offline_env(EXTRA="x")
    assert child["HF_HUB_OFFLINE"] == "1" and child["EXTRA"] == "x"


def test_app_dir_is_the_checkout_with_app_pages_and_assets():
    root = Path(__file__).resolve().parents[3]
    assert env.app_dir() == root
    assert (env.app_dir() / "app.py").is_file()
    assert (env.assets_dir() / "sample_corpus.txt").is_file()


def test_app_dir_prefers_the_copy_shipped_in_a_wheel(monkeypatch, tmp_path):
    fake_module = tmp_path / "backend" / "engine" / "environment.py"
    fake_module.parent.mkdir(parents=True)
    fake_module.write_text("")
    monkeypatch.setattr(env, "__file__", str(fake_module))
    assert env.app_dir() == tmp_path  # no isoscope_app/ beside backend: the folder itself
    (tmp_path / "isoscope_app").mkdir()
    (tmp_path / "isoscope_app" / "app.py").write_text("")
    assert env.app_dir() == tmp_path / "isoscope_app"
