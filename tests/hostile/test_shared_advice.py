"""A shared server's messages name only what its visitor can do: no command-line flag, no
environment variable, no package to install, no checkbox shared mode hides and no folder on the
server. Each message is produced by the code that writes it (a reworded message fails here, not
silently in the rewrite, :data:`isoscope.ui.server.access.OPERATOR_ADVICE`)."""

from __future__ import annotations

import errno
import importlib.util
import shutil
from pathlib import Path

import pytest

from isoscope.engine.errors import IsoscopeError
from isoscope.ui.server import access
from tests.app.conftest import shown
from tests.hostile.conftest import shared_app

# What only the operator can act on.
OPERATOR_ONLY = ("--", "ISOSCOPE_", "$", "Allow pickle", "apt-get", "brew", "pip install",
                 "make venv", "opt in", "UI:")  # fmt: skip


def _message(call) -> str:
    with pytest.raises(IsoscopeError) as caught:
        call()
    return str(caught.value)


def _pickle_folder(tmp_path: Path, monkeypatch) -> str:
    from isoscope.engine.load.checkpoints import read_folder

    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "pytorch_model.bin").write_bytes(b"not read")
    return _message(
        lambda: read_folder(folder, str(folder), "pickled", allow_pickle=False, head="base")
    )


def _pickle_hub_repo(tmp_path: Path, monkeypatch) -> str:
    from isoscope.engine.load.hub import files_to_fetch

    files = {"config.json": 10, "pytorch_model.bin": 100, "tokenizer.json": 10}
    return _message(lambda: files_to_fetch(files, "org/pickled", allow_pickle=False))


def _cache_not_writable(tmp_path: Path, monkeypatch) -> str:
    from isoscope.engine.store.cache import ResultCache

    cache = ResultCache(tmp_path / "server-cache", limit="1G")
    return cache._not_writable(OSError(errno.EROFS, "Read-only file system"))


def _cache_too_small(tmp_path: Path, monkeypatch) -> str:
    from isoscope.engine.store.cache import ResultCache

    cache = ResultCache(tmp_path / "server-cache", limit="1G")
    return cache._too_large(2 * 1024**3, 1024**3)


def _no_espeak(tmp_path: Path, monkeypatch) -> str:
    from isoscope.engine.inputs import media

    monkeypatch.setattr(shutil, "which", lambda name: None)
    return _message(lambda: media.demo_speech(tmp_path / "no-speech"))


def _no_bundled_decoder(tmp_path: Path, monkeypatch) -> str:
    from isoscope.engine.load import gguf

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    return _message(gguf.bundled_gguf_path)


MESSAGES = {
    "pickle-only folder": _pickle_folder,
    "pickle-only Hub repo": _pickle_hub_repo,
    "cache not writable": _cache_not_writable,
    "cache limit too small": _cache_too_small,
    "no espeak-ng": _no_espeak,
    "no bundled decoder": _no_bundled_decoder,
}


@pytest.mark.parametrize("case", list(MESSAGES))
def test_a_visitor_reads_only_advice_they_can_follow(shared_env, case, tmp_path, monkeypatch):
    text = MESSAGES[case](tmp_path, monkeypatch)
    assert any(word in text for word in OPERATOR_ONLY), text  # the operator's version has it
    visitor = access.for_visitor(text)
    assert not [word for word in OPERATOR_ONLY if word in visitor], visitor
    if "cache" in case:  # the server's own folder (a model folder is the one the visitor named)
        assert "server-cache" not in visitor, visitor
    shared_env.setenv("ISOSCOPE_SHARED", "0")
    access.reset_policy()
    assert access.for_visitor(text) == text  # on localhost the reader is the operator


def test_a_pickle_only_model_folder_is_not_told_to_tick_a_hidden_box(shared_env, tmp_path):
    """The issue's case: a folder under ISOSCOPE_MODEL_DIRS with pickle weights only."""
    from tests import zoo

    folder = zoo.build("bert", tmp_path / "models" / "pickled")
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    (folder / "pytorch_model.bin").write_bytes(b"never read")
    shared_env.setenv("ISOSCOPE_MODEL_DIRS", str(tmp_path / "models"))
    access.reset_policy()
    at = shared_app(str(folder))
    at.run()
    assert not at.exception
    errors = " ".join(shown(e.value) for e in at.error)
    assert "never loads pickle weights" in errors, errors
    assert "Allow pickle" not in errors and "--allow-pickle" not in errors
    assert "sb_allow_pickle" not in {w.key for w in at.checkbox}
