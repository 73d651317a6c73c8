"""The atlas's point files (issue 35): each published view gets its own unguessable token, a
session sees only its newest file, and the folder holds at most ``keep`` files."""

from __future__ import annotations

import pytest

from isoscope.ui.widgets.atlas import PointStore

pytestmark = pytest.mark.unit


def test_a_session_gets_only_its_own_newest_file(tmp_path):
    store = PointStore(tmp_path / "data", keep=3)
    a1 = store.publish("session-a", b"A1")
    b1 = store.publish("session-b", b"B1")
    a2 = store.publish("session-a", b"A2")
    for url in (a1, b1, a2):
        assert url.startswith("data/") and str(tmp_path) not in url
        assert len(url.removeprefix("data/").removesuffix(".bin")) >= 32
    assert len({a1, b1, a2}) == 3
    files = {p.name: p.read_bytes() for p in (tmp_path / "data").iterdir()}
    assert files == {b1.removeprefix("data/"): b"B1", a2.removeprefix("data/"): b"A2"}


def test_the_folder_keeps_only_the_newest_files(tmp_path):
    store = PointStore(tmp_path / "data", keep=2)
    urls = [store.publish(f"session-{i}", bytes([i])) for i in range(5)]
    left = sorted(p.name for p in (tmp_path / "data").iterdir())
    assert left == sorted(u.removeprefix("data/") for u in urls[-2:])
