"""The CLI's shared option groups: every command that loads a model takes the one model-options
group of isoscope.commands.common.add_model_args (``--device-map`` included), nowhere redefined."""

from __future__ import annotations

import argparse
import json

import pytest

from isoscope.analysis.positional.params import QK_MAX_LENGTH
from isoscope.cli import build_parser
from isoscope.commands.common import add_model_args, check_out_path, write_json
from isoscope.engine.errors import IsoscopeError
from isoscope.engine.params import BATCH_SIZE

MODEL_OPTIONS = {"--device", "--dtype", "--device-map", "--allow-pickle", "--max-length"}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_that_loads_a_model_has_the_whole_model_group(name):
    command = COMMANDS[name]
    options = {opt for action in command._actions for opt in action.option_strings}
    if "--device" not in options:
        return  # loads no model (e.g. cache, serve)
    assert MODEL_OPTIONS <= options, f"{name} lacks {sorted(MODEL_OPTIONS - options)}"
    groups = {
        opt: group.title
        for group in command._action_groups
        for action in group._group_actions
        for opt in action.option_strings
    }
    assert {groups[opt] for opt in MODEL_OPTIONS} == {"model"}, name


@pytest.mark.parametrize("name", ["compare", "trajectory"])
def test_compare_and_trajectory_accept_device_map(name):
    """They copied the options once and dropped ``--device-map``; now they share the group."""
    args = {"compare": ["--model-a", "default"], "trajectory": []}[name] + ["--texts", "t.txt"]
    command = COMMANDS[name]
    required = [a for a in command._actions if a.required and a.option_strings]
    extra = []
    for action in required:
        if action.option_strings[0] not in args:
            extra += [action.option_strings[0], "x"]
    parsed = command.parse_args([*args, *extra, "--out", "o.json", "--device-map", "auto"])
    assert parsed.device_map == "auto" and parsed.device == "auto"


def test_no_module_imports_another_modules_private_name():
    """Names shared across modules are public (``files.check_size``, ``common.read_pairs``,
    ``models.resolve_folder``, ``models.bundled_tokenizer``)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    allowed: set[tuple[str, str]] = set()
    found = []
    for path in [*(root / "backend").rglob("*.py"), *(root / "ui").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("backend")
            ):
                for alias in node.names:
                    name = alias.name
                    if name.startswith("_") and not name.startswith("__"):
                        if (node.module, name) not in allowed:
                            found.append(f"{path.relative_to(root)}: {node.module}.{name}")
    assert found == []


def test_model_options_are_one_group_with_or_without_model():
    parser = argparse.ArgumentParser()
    add_model_args(parser, max_length=QK_MAX_LENGTH)  # an analysis's own declaration
    args = parser.parse_args(["--device-map", "auto"])
    assert (args.model, args.device, args.dtype, args.device_map) == (
        "default", "auto", "float32", "auto"
    )  # fmt: skip
    assert args.max_length == QK_MAX_LENGTH.default and args.allow_pickle is False
    assert args.batch_size == BATCH_SIZE.default
    group = next(g for g in parser._action_groups if g.title == "model")
    assert {a.dest for a in group._group_actions} >= {"model", "device", "device_map"}

    without = argparse.ArgumentParser()
    add_model_args(without, source=False)
    assert not hasattr(without.parse_args([]), "model")
    assert without.parse_args(["--device-map", "auto"]).device_map == "auto"


def test_out_path_must_be_a_file_in_an_existing_folder(tmp_path):
    assert check_out_path(str(tmp_path / "a.json")) == tmp_path / "a.json"
    with pytest.raises(IsoscopeError, match="is a folder"):
        check_out_path(str(tmp_path))
    with pytest.raises(IsoscopeError, match="does not exist"):
        check_out_path(str(tmp_path / "missing" / "a.json"))


def test_write_json_is_strict(tmp_path, capsys):
    out = tmp_path / "o.json"
    write_json(out, {"x": float("nan")})
    assert json.loads(out.read_text(), parse_constant=lambda t: 1 / 0) == {"x": None}
    assert "wrote" in capsys.readouterr().err
