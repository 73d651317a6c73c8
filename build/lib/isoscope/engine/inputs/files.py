"""The checks every file a user gives goes through, whatever it holds (a corpus, sentence pairs,
word-sense rows, an image or a clip): one size limit, :data:`isoscope.engine.params.MAX_FILE_BYTES`,
and one wording for a file that is too large, missing, not a regular file, unreadable, binary or
not UTF-8.

:func:`read_capped` is the one way a user's file is read: it refuses anything but a regular file
before reading (a FIFO would wait for a writer forever, ``/dev/zero`` never ends, a folder is not
a file), never trusts ``st_size`` (``/proc`` files say 0, a file can grow while it is read), and
reads at most the cap plus one byte, so memory stays bounded whatever the path names.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from isoscope.engine.errors import InputError
from isoscope.engine.params import MAX_FILE_BYTES


def _too_large(name: str, size: int) -> InputError:
    return InputError(
        f"{name} is {size / 2**20:.1f} MiB; the limit is {MAX_FILE_BYTES // 2**20} MiB: "
        "split it or sample it"
    )


def _over_cap(name: str, cap: int) -> InputError:
    return InputError(f"{name} is over the limit of {cap / 2**20:g} MiB: split it or sample it")


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def unreadable(path: Path, exc: OSError, what: str) -> InputError:
    """The one line for a path that cannot be opened or read (permission, missing, I/O)."""
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
        return InputError(
            f"{str(path)!r} cannot be read (permission denied); give {what} you can read"
        )
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{str(path)!r} does not exist; give the path of {what}")
    reason = exc.strerror or type(exc).__name__
    return InputError(f"{str(path)!r} cannot be read ({reason}); give the path of {what}")


def regular_file_stat(path: Path, what: str) -> os.stat_result:
    """``path``'s stat (symlinks followed) when it is a regular file, else one :class:`InputError`
    naming what it is (a folder, a FIFO, a device), missing or unreadable."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise unreadable(path, exc, what) from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            f"{str(path)!r} is {_kind_of(info.st_mode)}, not a file; give the path of {what}"
        )
    return info


def read_capped(path: str | Path, what: str = "a text file", cap: int | None = None) -> bytes:
    """The bytes of the regular file at ``path``, at most ``cap`` (default ``MAX_FILE_BYTES``);
    :class:`InputError` in one line for a non-regular file, a missing or unreadable one, or one
    over the cap. Opened without blocking (a FIFO swapped in after the check cannot hang it)
    and read to at most ``cap + 1`` bytes, whatever its ``st_size`` says."""
    path = Path(path)
    cap = MAX_FILE_BYTES if cap is None else cap
    info = regular_file_stat(path, what)
    if info.st_size > cap:
        raise (
            _too_large(path.name, info.st_size)
            if cap == MAX_FILE_BYTES
            else _over_cap(path.name, cap)
        )
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise unreadable(path, exc, what) from None
    with os.fdopen(fd, "rb", buffering=0) as fh:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between the stat and the open
                raise InputError(f"{str(path)!r} is not a regular file; give the path of {what}")
            chunks: list[bytes] = []
            left = cap + 1
            while left > 0:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as exc:
            raise unreadable(path, exc, what) from None
    raw = b"".join(chunks)
    if len(raw) > cap:
        raise _over_cap(path.name, cap)
    return raw


def files_under(folder: Path, what: str, most: int, suffixes: tuple[str, ...] = ()) -> list[Path]:
    """The regular files under ``folder`` (recursively; hidden files and folders skipped, symlinked
    folders not entered), only those ending in ``suffixes`` when given, sorted by relative path.
    A sub-folder that cannot be read, or more than ``most`` files, is one :class:`InputError`."""
    found: list[Path] = []

    def refuse(exc: OSError) -> None:
        raise unreadable(Path(exc.filename or folder), exc, what)

    for root, dirs, names in os.walk(folder, onerror=refuse):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            file = Path(root) / name
            if name.startswith(".") or (suffixes and file.suffix.lower() not in suffixes):
                continue
            if file.is_file():  # a FIFO or a device is not a file to read
                found.append(file)
                if len(found) > most:
                    raise InputError(
                        f"{str(folder)!r} holds more than {most:,} files; pass a folder with "
                        "fewer (or one of its sub-folders)"
                    )
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def check_size(path: Path) -> None:
    """Refuse a file over ``MAX_FILE_BYTES``, or a path that is not a regular file, before
    reading it (each shard the Ray engine reads; its reader is bounded by this check only)."""
    size = regular_file_stat(path, "a text file").st_size
    if size > MAX_FILE_BYTES:
        raise _too_large(path.name, size)


def check_bytes(raw: bytes, name: str) -> None:
    """Refuse uploaded bytes over ``MAX_FILE_BYTES``."""
    check_bytes_count(len(raw), name)


def check_bytes_count(size: int, name: str) -> None:
    """Refuse ``size`` bytes (an upload's) over ``MAX_FILE_BYTES``."""
    if size > MAX_FILE_BYTES:
        raise _too_large(name, size)


def read_file(source: bytes | str | Path, name: str | None, what: str) -> tuple[bytes, str]:
    """``(bytes, name)`` of an upload (``bytes``) or of the file at a path, within the size limit;
    ``what`` names the kind of file the message asks for (``"a CSV file"``)."""
    if isinstance(source, bytes | bytearray):
        raw, name = bytes(source), name or "uploaded file"
        check_bytes(raw, name)
        return raw, name
    path = Path(source)
    if not path.exists() and not path.is_symlink():
        raise InputError(f"{str(path)!r} does not exist or is not a file; give the path of {what}")
    return read_capped(path, what), name or path.name


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
