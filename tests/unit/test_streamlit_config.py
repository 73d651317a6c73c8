"""The server settings that latency and safety depend on stay in .streamlit/config.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


def test_server_settings():
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    assert config["server"]["address"] == "127.0.0.1"  # localhost unless configured otherwise
    assert config["server"]["fileWatcherType"] == "none"  # no watcher over the whole tree
    # a full gc.collect() after every rerun cost ~0.5 s per control change (issue 15)
    assert config["runner"]["postScriptGC"] is False
