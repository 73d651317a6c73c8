"""The checks every user file goes through (isoscope.engine.inputs.files)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from isoscope.engine.errors import InputError
from isoscope.engine.inputs import files


def test_size_limit_for_bytes_and_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 10)
    files.check_bytes(b"x" * 10, "ok.txt")
    with pytest.raises(InputError, match=r"^big.txt is 0.0 MiB; the limit is 0 MiB: split it"):
        files.check_bytes(b"x" * 11, "big.txt")
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * 11)
    with pytest.raises(InputError, match="big.csv is"):
        files.check_size(path)
    with pytest.raises(InputError, match="big.csv is"):
        files.read_file(path, None, "a CSV file")


def test_read_file_names_uploads_and_paths(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"a,b")
    assert files.read_file(path, None, "a CSV file") == (b"a,b", "rows.csv")
    assert files.read_file(b"a,b", None, "a CSV file") == (b"a,b", "uploaded file")
    assert files.read_file(bytearray(b"a"), "up.csv", "a CSV file") == (b"a", "up.csv")
    with pytest.raises(InputError, match="is a folder, not a file; give the path of a CSV"):
        files.read_file(tmp_path, None, "a CSV file")


def test_decode_text_refuses_binary_and_bad_utf8():
    assert files.decode_text("\ufeffhé".encode(), "t.txt", ".txt") == "hé"
    with pytest.raises(
        InputError, match=r"t.bin looks like a binary file; save it as UTF-8 text \(.csv\)"
    ):
        files.decode_text(b"PK\x00\x01", "t.bin", ".csv")
    with pytest.raises(InputError, match=r"not valid UTF-8 \(byte 1\)"):
        files.decode_text(b"a\xff", "t.txt", ".txt")


@pytest.fixture
def not_files(tmp_path):
    """Paths that are not regular files: a FIFO (reading it would wait for a writer forever),
    a character device that never ends, a folder, and a symlink to the device."""
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    return {"fifo": (fifo, "a pipe"), "device": (Path("/dev/zero"), "a device"),
            "folder": (tmp_path, "a folder"), "link": (link, "a device")}  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "link"])
def test_the_capped_reader_refuses_what_is_not_a_regular_file(not_files, kind):
    path, said = not_files[kind]
    with pytest.raises(InputError, match=f"is {said}.*, not a file; give the path of a text file"):
        files.read_capped(path, "a text file")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "link"])
def test_every_reader_of_user_files_refuses_them(not_files, kind):
    from isoscope.engine.inputs.corpus import load_corpus_file
    from isoscope.engine.inputs.pairs import read_pairs_csv

    path, said = not_files[kind]
    if kind != "folder":  # a folder is a corpus of shards: tested below
        with pytest.raises(InputError, match=f"is {said}"):
            load_corpus_file(path)
    with pytest.raises(InputError, match=f"is {said}"):
        read_pairs_csv(path)


def test_the_cap_holds_when_the_size_on_disk_lies():
    """/proc files say 0 bytes and hold more: the reader counts what it reads, not st_size."""
    maps = Path("/proc/self/maps")
    assert maps.stat().st_size == 0
    with pytest.raises(InputError, match="maps is over the limit of"):
        files.read_capped(maps, "a text file", cap=16)
    assert len(files.read_capped(maps, "a text file", cap=1 << 20)) > 16


@pytest.mark.parametrize("size", [10, 11, 4096])
def test_the_cap_is_exact(tmp_path, size):
    path = tmp_path / "f.txt"
    path.write_bytes(b"x" * size)
    if size <= 10:
        assert files.read_capped(path, "a text file", cap=10) == b"x" * size
    else:
        with pytest.raises(InputError, match="over the limit|the limit is"):
            files.read_capped(path, "a text file", cap=10)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
        (OSError(errno.EPERM, "Operation not permitted"), "permission denied"),
        (OSError(errno.EIO, "Input/output error"), "Input/output error"),
    ],
)
def test_an_unreadable_file_is_one_line(tmp_path, monkeypatch, error, said):
    path = tmp_path / "locked.txt"
    path.write_text("a\n")

    def refuse(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(files.os, "open", refuse)
    with pytest.raises(InputError, match=said) as caught:
        files.read_capped(path, "a text file")
    assert "\n" not in str(caught.value)


def test_a_folder_walk_that_meets_an_unreadable_folder_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("x\n")

    def scandir_refused(path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(files.os, "scandir", scandir_refused)
    with pytest.raises(InputError, match="permission denied"):
        files.files_under(tmp_path, "a folder of text files", 100)


def test_a_folder_walk_is_bounded(tmp_path):
    for i in range(5):
        (tmp_path / f"{i}.txt").write_text("x\n")
    assert len(files.files_under(tmp_path, "a folder", 5)) == 5
    with pytest.raises(InputError, match="more than 4 files"):
        files.files_under(tmp_path, "a folder", 4)
