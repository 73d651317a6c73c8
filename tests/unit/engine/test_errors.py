"""User errors: every class is an IsoscopeError, and the CLI turns each into one ``error:`` line
on stderr with exit status 2 (anything else is a bug, exit 1)."""

from __future__ import annotations

import pytest

import isoscope.commands.cache as cache_command
from isoscope import cli
from isoscope.engine import errors
from isoscope.engine.errors import InputError, IsoscopeError, ModelLoadError, UnsupportedModelError

USER_ERRORS = (InputError, ModelLoadError, UnsupportedModelError)


def test_every_user_error_class_is_an_isoscope_error():
    defined = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type)
        and issubclass(obj, Exception)
        and obj.__module__ == errors.__name__
    }
    assert defined == {IsoscopeError, *USER_ERRORS}
    assert all(issubclass(cls, IsoscopeError) for cls in defined)
    assert not issubclass(IsoscopeError, (ValueError, RuntimeError))  # not caught as a bug's type


@pytest.mark.parametrize("cls", USER_ERRORS)
def test_the_cli_prints_one_error_line_and_exits_2(cls, monkeypatch, capsys):
    def raises(args):
        raise cls("the planted message; do this instead")

    monkeypatch.setattr(cache_command, "run", raises)
    assert cli.main(["cache", "--info"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: the planted message; do this instead\n"
    assert captured.out == ""


def test_a_bug_is_not_a_user_error(monkeypatch, capsys):
    def raises(args):
        raise ZeroDivisionError("planted bug")

    monkeypatch.setattr(cache_command, "run", raises)
    assert cli.main(["cache", "--info"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (ZeroDivisionError: planted bug)")
    assert err.count("\n") == 1
