"""CLI subcommands; each module exposes ``add_parser(subparsers)`` (see backend/cli.py)."""
