"""What a page shows when it meets an error nobody planned for: one line saying what failed and how
to report it, the details (exception, the frames inside isoscope, versions) folded in an expander,
never a raw traceback. The frame (``app.py``) calls :func:`show_failure` around the link, the
sidebar and every page, and every fragment is a :func:`fragment` (Streamlit shows a fragment's
error itself, with its traceback, unless the fragment catches it).

On a shared server a visitor sees the error's type only: its message and frames can name the
machine's files, so they go to the server's log (stderr) for the operator instead. Streamlit's own
error box, for anything that escapes all of these, is set to show no details there either
(:func:`isoscope.ui.server.access.hide_error_details`)."""

from __future__ import annotations

import functools
import platform
import sys
import traceback
from collections.abc import Callable
from typing import Any

import streamlit as st

from isoscope.engine.errors import IsoscopeError
from isoscope.ui.frame.literal import literal, message

PAGE_KEY = "isoscope_page_title"  # the page being shown, for errors met in its fragments


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
    st.error(literal(failure_line(exc, page)), icon=":material/bug_report:")
    with st.expander("Details for the report", expanded=False):
        st.code(failure_details(exc), language="text")


def show_failure(exc: Exception, page: str | None = None) -> None:
    """What a view shows for an error it did not handle itself: an :class:`IsoscopeError`'s message
    (it says what to do), a saved analysis's "this view needs the model", else
    :func:`show_unexpected`. ``page``: the page's title (default: the page being shown)."""
    from isoscope.engine.store.saved import ModelUnavailableError

    if isinstance(exc, ModelUnavailableError):  # a saved analysis is open, without its model
        st.info(f"**This view needs the model.** {message(exc)}", icon=":material/memory:")
    elif isinstance(exc, IsoscopeError):  # a message, never a trace
        st.error(f"**This view cannot be shown.** {message(exc)}")
    else:  # a bug: one line and how to report it, the details folded away (or in the log)
        show_unexpected(exc, page or str(st.session_state.get(PAGE_KEY) or "current"))


def fragment(func: Callable[..., Any] | None = None, *, run_every: float | None = None):
    """``st.fragment`` whose errors are shown by :func:`show_failure` inside the fragment, as the
    frame shows a page's (Streamlit's own handler would show the traceback and the message)."""

    def wrap(body: Callable[..., Any]):
        @functools.wraps(body)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return body(*args, **kwargs)
            except Exception as exc:  # st.stop / st.rerun are BaseExceptions: they pass through
                show_failure(exc)
                return None

        return st.fragment(guarded, run_every=run_every)

    return wrap(func) if func is not None else wrap
