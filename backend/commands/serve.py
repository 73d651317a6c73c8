"""``isoscope serve``: start the dashboard (``streamlit run`` on the bundled ``app.py``).

Listens on localhost unless ``--address`` says otherwise. The server settings in
``.streamlit/config.toml`` (shipped with the app) are passed as command-line options, so they hold
whatever folder the command is started from; ``--address`` and ``--port`` override theirs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

from backend.engine.environment import app_dir, offline_env
from backend.engine.errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="start the dashboard in the browser (Streamlit)")
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it)",
    )
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.set_defaults(func=run)


def config_options(config: Path) -> list[str]:
    """``--section.key value`` options for every setting in a Streamlit ``config.toml``."""
    if not config.is_file():
        return []
    options: list[str] = []
    for section, values in tomllib.loads(config.read_text()).items():
        for key, value in values.items():
            if isinstance(value, bool):
                value = str(value).lower()
            options += [f"--{section}.{key}", str(value)]
    return options


def streamlit_command(address: str, port: int) -> list[str]:
    """The ``python -m streamlit run`` command line that serves the dashboard."""
    if not 0 < port < 65536:
        raise InputError(f"--port {port} is not a port number; give one from 1 to 65535")
    if not address.strip():
        raise InputError("--address is empty; give an address such as 127.0.0.1 or 0.0.0.0")
    app = app_dir() / "app.py"
    if not app.is_file():
        raise InputError(f"the dashboard's app.py is missing ({app}); reinstall isoscope")
    command = [sys.executable, "-m", "streamlit", "run", str(app)]
    command += config_options(app_dir() / ".streamlit" / "config.toml")
    command += ["--server.address", address, "--server.port", str(port)]
    return command


def run(args: argparse.Namespace) -> int:
    command = streamlit_command(args.address, args.port)
    sys.stderr.write(f"isoscope: serving on http://{args.address}:{args.port}\n")
    sys.stderr.flush()
    os.execve(sys.executable, command, offline_env())
    return 0  # not reached
