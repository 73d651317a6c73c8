"""``isoscope serve``: the streamlit command line it runs, and its refusals."""

from __future__ import annotations

import pytest

from backend.commands.serve import config_options, streamlit_command
from backend.engine.environment import app_dir
from backend.engine.errors import InputError


def test_command_serves_the_app_with_the_shipped_config_and_the_given_address():
    command = streamlit_command("127.0.0.1", 8600)
    assert command[1:4] == ["-m", "streamlit", "run"]
    assert command[4] == str(app_dir() / "app.py")
    # address and port come last, so they override the config file's
    assert command[-4:] == ["--server.address", "127.0.0.1", "--server.port", "8600"]
    assert "--server.fileWatcherType" in command and "--runner.postScriptGC" in command


def test_config_options_flatten_every_section(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[server]\nheadless = true\nport = 1\n[theme]\nbase = "light"\n')
    assert config_options(config) == [
        "--server.headless", "true", "--server.port", "1", "--theme.base", "light",
    ]  # fmt: skip
    assert config_options(tmp_path / "missing.toml") == []


@pytest.mark.parametrize(("address", "port"), [("127.0.0.1", 0), ("127.0.0.1", 70000), (" ", 80)])
def test_bad_address_or_port_is_refused(address, port):
    with pytest.raises(InputError):
        streamlit_command(address, port)
