"""Command-line interface: ``isoscope COMMAND ...`` (also ``python -m isoscope COMMAND ...``).

Every command writes JSON to ``--out`` and progress to stderr. Any user error prints one line,
``error: <what is wrong and what to do>``, and exits with status 2; never a traceback.
Subcommands live in ``backend/commands/<name>.py``, each exposing ``add_parser(subparsers)``; an
analysis declares its commands in :data:`isoscope.analysis.ANALYSES`.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import NoReturn

from isoscope.analysis import ANALYSES, SERVICE_COMMANDS
from isoscope.engine.environment import quiet_libraries, use_runtime_environment
from isoscope.engine.errors import IsoscopeError

# The service commands, then each analysis's own, in the order of their declarations.
COMMAND_MODULES = (*SERVICE_COMMANDS, *(c for a in ANALYSES for c in a.commands))


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it: "(default:
    none)" for an option that is off unless given, "(default: off)" for a flag."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            not action.option_strings
            or action.default is argparse.SUPPRESS
            or re.search(r"\(default|default:|defaults? to|%\(default\)", text, re.IGNORECASE)
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            return text
        if action.required:
            return f"{text} (required)"
        if action.default is None:
            shown = "none"
        elif isinstance(action.default, bool) and action.nargs == 0:
            shown = "on" if action.default else "off"
        else:
            shown = "%(default)s"
        return f"{text} (default: {shown})"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's own convention)
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
