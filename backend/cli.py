"""Command-line interface: ``isoscope COMMAND ...`` (also ``python -m isoscope COMMAND ...``).

Every command writes JSON to ``--out`` and progress to stderr. Any user error prints one line,
``error: <what is wrong and what to do>``, and exits with status 2; never a traceback.
Subcommands live in ``backend/commands/<name>.py``, each exposing ``add_parser(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from isoscope.engine.environment import quiet_libraries, use_runtime_environment
from isoscope.engine.errors import IsoscopeError

COMMAND_MODULES = (
    "serve",
    "prewarm",
    "analyze",
    "sts",
    "ablate",
    "positional",
    "cache",
    "report",
    "export",
    "massive",
    "compare",
    "trajectory",
    "quant",
    "qk",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's own convention)
        sys.stderr.write(f"error: {message} (see --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="isoscope", description="isoscope: embedding geometry of Transformer models"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"isoscope.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"isoscope.commands.{name}":
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    use_runtime_environment()
    quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except IsoscopeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except MemoryError:
        sys.stderr.write(
            "error: out of memory; lower --batch-size, --max-length or the number of texts\n"
        )
        return 2
    except Exception as exc:  # a bug: still one line, with a hint to report it
        sys.stderr.write(
            f"error: internal error ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); please report it\n"
        )
        return 1
