"""Shared-server mode in the app: a typed server path is refused with the same text whether it is
a folder, a file or missing; no cache controls, no pickle box, no saved-analysis path; the
passphrase gate; and a local server keeps every control."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from isoscope.engine.serve.access import SOURCE_REFUSED
from isoscope.ui.server import access

APP = str(Path(__file__).resolve().parents[3] / "app.py")
TINY = "random:bert:layers=2,width=32,heads=2,seed=5"


@pytest.fixture
def shared_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ISOSCOPE_SHARED", "1")
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ISOSCOPE_PASSPHRASE", raising=False)
    access.reset_policy()
    yield monkeypatch
    access.reset_policy()


def _app() -> AppTest:
    from isoscope.ui.frame.selection import Selection
    from isoscope.ui.frame.session import SELECTION_KEY

    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[SELECTION_KEY] = Selection(model_source=TINY, device="cpu")
    return at


def _keys(at: AppTest) -> set[str]:
    found = set()
    for kind in ("checkbox", "button", "number_input", "text_input", "file_uploader"):
        try:
            found |= {w.key for w in at.get(kind) if w.key}
        except Exception:
            pass
    return found


def test_a_typed_server_path_is_refused_with_one_text(shared_env, tmp_path):
    existing = tmp_path / "model"
    existing.mkdir()
    (existing / "config.json").write_text("{}")
    a_file = tmp_path / "weights.bin"
    a_file.write_text("x")
    at = _app()
    at.run()
    assert not at.exception
    messages = []
    for typed in (str(existing), str(a_file), str(tmp_path / "missing"), "/etc", "/etc/passwd"):
        at.text_input(key="sb_model_custom").set_value(typed).run()
        assert not at.exception
        warnings = [w.value for w in at.sidebar.warning]
        assert warnings, typed
        messages.append(warnings[0])
        assert at.button(key="sb_run").disabled
    assert set(messages) == {SOURCE_REFUSED}


def test_no_cache_controls_no_pickle_box_no_saved_path(shared_env):
    at = _app()
    at.run()
    assert not at.exception
    keys = _keys(at)
    assert "sb_allow_pickle" not in keys
    assert "sb_cache_clear" not in keys and "sb_cache_limit_gib" not in keys
    assert "saved_path" not in keys and "saved_upload" in keys
    assert any("managed by its operator" in c.value for c in at.sidebar.caption)


def test_a_link_to_a_server_path_is_refused(shared_env, tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    at = _app()
    at.query_params["model"] = str(folder)
    at.run()
    assert not at.exception
    notices = [str(w.value) for w in at.warning]
    assert any(f"model {str(folder)!r}" in n for n in notices), notices
    from isoscope.ui.frame.session import SELECTION_KEY

    assert at.session_state[SELECTION_KEY].model_source == TINY  # the link's model was not taken


def test_the_passphrase_gate(shared_env):
    shared_env.setenv("ISOSCOPE_PASSPHRASE", "open sesame")
    access.reset_policy()
    at = _app()
    at.run()
    assert not at.exception
    assert [t.value for t in at.title] == ["isoscope"]  # nothing else drawn
    at.text_input(key="isoscope_passphrase_input").set_value("open sesam")
    at.button[0].click().run()
    assert any("not right" in e.value for e in at.error)
    assert [t.value for t in at.title] == ["isoscope"]
    at.text_input(key="isoscope_passphrase_input").set_value("open sesame")
    at.button[0].click().run()
    assert not at.exception
    assert "Overview" in [t.value for t in at.title]


def test_a_local_server_keeps_every_control(monkeypatch, tmp_path):
    monkeypatch.delenv("ISOSCOPE_SHARED", raising=False)
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    access.reset_policy()
    try:
        at = _app()
        at.run()
        assert not at.exception
        keys = _keys(at)
        assert {"sb_allow_pickle", "saved_path"} <= keys
    finally:
        access.reset_policy()


def test_a_visitors_corpus_beyond_the_text_limit_is_refused_by_name(shared_env):
    from isoscope.ui.frame.selection import Selection
    from isoscope.ui.frame.session import SELECTION_KEY

    shared_env.setenv("ISOSCOPE_MAX_TEXTS", "2")
    access.reset_policy()
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[SELECTION_KEY] = Selection(
        model_source=TINY, device="cpu", corpus_kind="paste", corpus_text="one\ntwo\nthree"
    )
    at.run()
    assert not at.exception
    assert any("text limit" in e.value for e in at.error)


def test_a_link_to_an_image_folder_opens_the_demo_set(shared_env, tmp_path):
    """Shared mode: a link may name the bundled demo images, never a folder of the server."""
    from tests.media_models import image_folder

    folder = str(image_folder(tmp_path / "imgs", 2))
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in {"page": "overview", "model": "random:vit", "corpus": "images"}.items():
        at.query_params[key] = value
    at.query_params["folder"] = folder
    at.run()
    assert not at.exception
    assert any(
        "this shared server opens only its bundled demo images" in w.value for w in at.warning
    )
    assert "folder" not in {k for k in at.query_params}
