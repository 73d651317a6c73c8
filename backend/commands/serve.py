"""``isoscope serve``: start the dashboard (``streamlit run`` on the bundled ``app.py``).

Listens on localhost unless ``--address`` says otherwise. The server settings in
``.streamlit/config.toml`` (shipped with the app) are passed as command-line options, so they hold
whatever folder the command is started from; ``--address`` and ``--port`` override theirs.

For a class: ``--prewarm`` (on by default, the default model) computes what the Overview shows
in a low-priority background thread of the server process while it starts
(:mod:`isoscope.ui.server.prewarm`); ``--shared`` (on by default whenever the address is not a loopback
one, see :mod:`isoscope.engine.serve.access`) locks the server down for visitors; ``--workers``
bounds the heavy analyses that run at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

from isoscope.engine.environment import app_dir, runtime_env
from isoscope.engine.errors import InputError


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="start the dashboard in the browser (Streamlit)")
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it)",
    )
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    shared = p.add_mutually_exclusive_group()
    shared.add_argument(
        "--shared",
        dest="shared",
        action="store_const",
        const=True,
        default=None,
        help="shared-server mode for visitors (default: on unless the address is a loopback one)",
    )
    shared.add_argument(
        "--no-shared",
        dest="shared",
        action="store_const",
        const=False,
        help="every control for every visitor, even on an exposed address (a trusted network)",
    )
    p.add_argument(
        "--prewarm",
        default="default",
        metavar="MODEL[,MODEL]",
        help="compute these models' default analysis at start (default: default; 'off' skips it)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="heavy analyses run at once (default: $ISOSCOPE_WORKERS, else one per core)",
    )
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


def server_env(args: argparse.Namespace) -> dict[str, str]:
    """The server's environment: the runtime settings (downloads allowed unless the user set
    HF_HUB_OFFLINE=1), and the mode and pool size asked for."""
    from isoscope.engine.serve.access import shared_mode

    env = runtime_env()
    if args.shared is not None:
        env["ISOSCOPE_SHARED"] = "1" if args.shared else "0"
    env["ISOSCOPE_SHARED"] = "1" if shared_mode(args.address, env) else "0"
    if args.workers is not None:
        if args.workers < 1:
            raise InputError(f"--workers {args.workers}: give 1 or more")
        env["ISOSCOPE_WORKERS"] = str(args.workers)
    return env


def prewarm_models(models: str) -> list[str]:
    """The ``--prewarm`` list (``off`` for none); a bad list fails before the server starts."""
    from isoscope.commands.prewarm import models_of

    if models.strip().lower() in ("off", "no", "none", ""):
        return []
    return models_of(models)


def flag_options(address: str, port: int) -> dict[str, object]:
    """Streamlit's options as ``bootstrap`` takes them (``section_key``: typed value, as the
    ``streamlit run`` flags become): the shipped config file's settings, then address and port."""
    config = app_dir() / ".streamlit" / "config.toml"
    settings = tomllib.loads(config.read_text()) if config.is_file() else {}
    flags: dict[str, object] = {
        f"{section}_{key}": value
        for section, values in settings.items()
        for key, value in values.items()
    }
    flags.update(server_address=address, server_port=port)
    return flags


def run(args: argparse.Namespace) -> int:
    streamlit_command(args.address, args.port)  # checks the address, the port and app.py
    models = prewarm_models(args.prewarm)
    os.environ.update(server_env(args))
    mode = "shared mode" if os.environ["ISOSCOPE_SHARED"] == "1" else "all controls"
    sys.stderr.write(f"isoscope: serving on http://{args.address}:{args.port} ({mode})\n")
    sys.stderr.flush()
    # Streamlit in this process, so the prewarm thread fills the caches the sessions will use
    # (isoscope.ui.server.process: the backend itself never imports streamlit).
    from isoscope.ui.server.process import run_server

    run_server(str(app_dir() / "app.py"), flag_options(args.address, args.port), models)
    return 0
