"""The CLI's contract: one ``isoscope`` parser with every command, and every failure is one line on
stderr with a non-zero exit (2 for a user error), never a traceback."""

from __future__ import annotations

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
