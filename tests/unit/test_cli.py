"""The CLI's contract: one ``isoscope`` parser with every command, and every failure is one line on
stderr with a non-zero exit (2 for a user error), never a traceback."""

from __future__ import annotations

import argparse
import re

import pytest

from isoscope import cli
from isoscope.engine.errors import InputError


def test_every_command_is_registered_under_isoscope(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: isoscope")
    for name in cli.COMMAND_MODULES:
        assert name in text


def test_a_bad_option_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["analyze", "--no-such-option"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


@pytest.mark.parametrize(
    ("exc", "code", "start"),
    [
        (InputError("texts.txt has no text"), 2, "error: texts.txt has no text"),
        (MemoryError(), 2, "error: out of memory"),
        (KeyboardInterrupt(), 130, "error: interrupted"),
        (RuntimeError("boom\nsecond line"), 1, "error: internal error (RuntimeError: boom)"),
    ],
)
def test_failures_are_one_line(monkeypatch, capsys, exc, code, start):
    def fail(_args):
        raise exc

    args = cli.build_parser().parse_args(["cache", "--info"])
    args.func = fail
    monkeypatch.setattr(cli, "build_parser", lambda: _FixedParser(args))
    assert cli.main(["cache", "--info"]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(start)


class _FixedParser:
    def __init__(self, args):
        self.args = args

    def parse_args(self, argv):
        return self.args


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_of_every_command_states_its_default(command):
    """``isoscope COMMAND --help`` gives each option's default (or says it is required)."""
    parser = _subcommands()[command]
    formatter = parser._get_formatter()
    missing = []
    for action in parser._actions:
        if not action.option_strings or action.help is argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._HelpAction):
            continue
        text = formatter._expand_help(action) if action.help else ""
        if not re.search(r"default|\(required\)", text, re.IGNORECASE):
            missing.append(action.option_strings[0])
    assert missing == [], f"isoscope {command}: options whose --help gives no default: {missing}"


@pytest.mark.parametrize(
    ("default", "kind", "shown"),
    [
        (None, "store", "(default: none)"),
        (3, "store", "(default: 3)"),
        ("auto", "store", "(default: auto)"),
        (False, "store_true", "(default: off)"),
    ],
)
def test_the_help_formatter_writes_the_default(default, kind, shown):
    parser = argparse.ArgumentParser(formatter_class=cli.DefaultsHelpFormatter)
    parser.add_argument("--x", action=kind, default=default, help="an option")
    assert shown in parser.format_help()


def test_the_help_formatter_leaves_a_help_that_states_its_default():
    parser = argparse.ArgumentParser(formatter_class=cli.DefaultsHelpFormatter)
    parser.add_argument("--x", default=1, help="an option (default: one)")
    parser.add_argument("--y", required=True, help="needed")
    text = " ".join(parser.format_help().split())
    assert "(default: one) (default" not in text and "needed (required)" in text
