"""What every command shares: one model-options group, the --out check, strict JSON output."""

from __future__ import annotations

import argparse
import json

import pytest

from backend.commands.common import add_model_args, check_out_path, write_json
from backend.engine.errors import IsoscopeError


def test_model_options_are_one_group_with_or_without_model():
    parser = argparse.ArgumentParser()
    add_model_args(parser, max_length=64)
    args = parser.parse_args(["--device-map", "auto"])
    assert (args.model, args.device, args.dtype, args.device_map) == (
        "default", "auto", "float32", "auto"
    )  # fmt: skip
    assert args.max_length == 64 and args.allow_pickle is False
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
