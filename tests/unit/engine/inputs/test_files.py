"""The checks every user file goes through (isoscope.engine.inputs.files)."""

from __future__ import annotations

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
    with pytest.raises(InputError, match="does not exist or is not a file; give the path of a CSV"):
        files.read_file(tmp_path, None, "a CSV file")


def test_decode_text_refuses_binary_and_bad_utf8():
    assert files.decode_text("\ufeffhé".encode(), "t.txt", ".txt") == "hé"
    with pytest.raises(
        InputError, match=r"t.bin looks like a binary file; save it as UTF-8 text \(.csv\)"
    ):
        files.decode_text(b"PK\x00\x01", "t.bin", ".csv")
    with pytest.raises(InputError, match=r"not valid UTF-8 \(byte 1\)"):
        files.decode_text(b"a\xff", "t.txt", ".txt")
