"""``isoscope serve``: the streamlit command line it runs, and its refusals."""

from __future__ import annotations

import pytest

from isoscope.commands.serve import config_options, streamlit_command
from isoscope.engine.environment import app_dir
from isoscope.engine.errors import InputError


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


def _args(*argv):
    from isoscope.cli import build_parser

    return build_parser().parse_args(["serve", *argv])


@pytest.mark.parametrize(
    ("argv", "shared"),
    [
        ([], "0"),
        (["--address", "0.0.0.0"], "1"),
        (["--shared"], "1"),
        (["--address", "0.0.0.0", "--no-shared"], "0"),
    ],
)
def test_server_env_decides_shared_mode(monkeypatch, argv, shared):
    from isoscope.commands.serve import server_env

    monkeypatch.delenv("ISOSCOPE_SHARED", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    env = server_env(_args(*argv))
    assert env["ISOSCOPE_SHARED"] == shared
    assert "HF_HUB_OFFLINE" not in env  # the server may download Hub ids
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert server_env(_args(*argv))["HF_HUB_OFFLINE"] == "1"  # the user's choice holds


def test_workers_and_prewarm_are_checked_before_the_server_starts(monkeypatch):
    from isoscope.commands.serve import prewarm_models, server_env

    assert server_env(_args("--workers", "3"))["ISOSCOPE_WORKERS"] == "3"
    with pytest.raises(InputError):
        server_env(_args("--workers", "0"))
    assert prewarm_models("off") == []
    assert prewarm_models("default, smollm2") == ["default", "smollm2"]
    with pytest.raises(InputError):
        prewarm_models(" , ")


def test_flag_options_carry_the_config_file_and_the_address():
    from isoscope.commands.serve import flag_options

    flags = flag_options("0.0.0.0", 8700)
    assert flags["server_address"] == "0.0.0.0" and flags["server_port"] == 8700
    assert flags["server_fileWatcherType"] == "none" and flags["runner_postScriptGC"] is False
    assert flags["server_runOnSave"] is False  # typed, as Streamlit's own flags become
