"""What a page shows when it meets an error nobody planned for: one line saying what failed and how
to report it, the details (exception, the frames inside isoscope, versions) folded in an expander,
never a raw traceback. The frame (``app.py``) calls :func:`show_unexpected` around every page.

On a shared server a visitor sees the error's type only: its message and frames can name the
machine's files, so they go to the server's log (stderr) for the operator instead."""

from __future__ import annotations

import platform
import sys
import traceback

import streamlit as st


def failure_line(exc: BaseException, page: str) -> str:
    """``"The Overview page stopped on an unexpected error (IndexError: index out of range in
    self). Please report it with the details below."``"""
    message = str(exc).splitlines()[0][:200] if str(exc) else ""
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return (
        f"The {page} page stopped on an unexpected error ({what}). Please report it to "
        "isoscope's maintainers with the details below; other pages still work."
    )


def failure_details(exc: BaseException) -> str:
    """The report's body: versions, then the frames of the exception (plain text)."""
    import torch
    import transformers

    versions = (
        f"python {platform.python_version()} · torch {torch.__version__} · "
        f"transformers {transformers.__version__} · streamlit {st.__version__}"
    )
    frames = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{versions}\n\n{frames}"


def shared_failure_line(exc: BaseException, page: str) -> str:
    """The line a shared server's visitor sees: the error's type, not its message."""
    return (
        f"The {page} page stopped on an unexpected error ({type(exc).__name__}). The details are "
        "in the server's log; please tell the person who runs this server."
    )


def show_unexpected(exc: BaseException, page: str) -> None:
    """One error line, and the details in a closed expander (to copy into a report); on a shared
    server, the details in the server's log only."""
    from isoscope.ui.server.access import shared

    if shared():
        sys.stderr.write(f"isoscope: unexpected error on the {page} page\n{failure_details(exc)}")
        st.error(shared_failure_line(exc, page), icon=":material/bug_report:")
        return
    st.error(failure_line(exc, page), icon=":material/bug_report:")
    with st.expander("Details for the report", expanded=False):
        st.code(failure_details(exc), language="text")
