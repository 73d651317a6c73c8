"""The one file uploader of every page: :func:`file_upload` builds Streamlit's widget and lets
nothing through that the server's upload limit refuses
(:meth:`isoscope.engine.serve.access.AccessPolicy.check_upload`: the file limit every user file
has, and on a shared server the per-visitor limit). A page never calls ``st.file_uploader``
itself (a test holds every page to this), so no uploader can skip the check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from isoscope.engine.errors import InputError
from isoscope.ui.server import access


@dataclass(frozen=True)
class Upload:
    """An uploaded file that passed the upload check: its name and bytes."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def getvalue(self) -> bytes:
        return self.data


def file_upload(
    label: str, *, type: list[str], key: str, help: str | None = None, where: Any = None
) -> Upload | None:
    """``where.file_uploader`` (``st`` unless a column or container is given), checked: the
    :class:`Upload` when one was chosen and the upload limit allows it, else None; a refused file
    is said under the widget in one line (its size and the limit)."""
    where = st if where is None else where
    chosen = where.file_uploader(label, type=type, key=key, help=help)
    if chosen is None:
        return None
    data = chosen.getvalue()
    try:
        access.policy().check_upload(chosen.name, len(data))
    except InputError as exc:
        where.error(f"**This file was not read.** {exc}")
        return None
    return Upload(chosen.name, data)
