"""The checks every file a user gives goes through, whatever it holds (a corpus, sentence pairs,
word-sense rows): one size limit, :data:`isoscope.engine.params.MAX_FILE_BYTES`, and one wording
for a file that is too large, missing, binary or not UTF-8."""

from __future__ import annotations

from pathlib import Path

from isoscope.engine.errors import InputError
from isoscope.engine.params import MAX_FILE_BYTES


def _too_large(name: str, size: int) -> InputError:
    return InputError(
        f"{name} is {size / 2**20:.1f} MiB; the limit is {MAX_FILE_BYTES // 2**20} MiB: "
        "split it or sample it"
    )


def check_size(path: Path) -> None:
    """Refuse a file over ``MAX_FILE_BYTES`` before reading it (also each shard the Ray engine
    reads)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise _too_large(path.name, size)


def check_bytes(raw: bytes, name: str) -> None:
    """Refuse uploaded bytes over ``MAX_FILE_BYTES``."""
    if len(raw) > MAX_FILE_BYTES:
        raise _too_large(name, len(raw))


def read_file(source: bytes | str | Path, name: str | None, what: str) -> tuple[bytes, str]:
    """``(bytes, name)`` of an upload (``bytes``) or of the file at a path, within the size limit;
    ``what`` names the kind of file the message asks for (``"a CSV file"``)."""
    if isinstance(source, bytes | bytearray):
        raw, name = bytes(source), name or "uploaded file"
        check_bytes(raw, name)
        return raw, name
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{str(path)!r} does not exist or is not a file; give the path of {what}")
    check_size(path)
    return path.read_bytes(), name or path.name


def decode_text(raw: bytes, name: str, accepted: str) -> str:
    """UTF-8 text (a BOM dropped) of a file that must be text; ``accepted`` names the formats the
    message offers (``".txt, .csv or .jsonl"``)."""
    if b"\x00" in raw[:8192]:
        raise InputError(f"{name} looks like a binary file; save it as UTF-8 text ({accepted})")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{name} is not valid UTF-8 (byte {exc.start}); save it as UTF-8 text and try again"
        ) from None
