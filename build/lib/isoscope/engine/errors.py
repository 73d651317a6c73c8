"""User-facing errors. Every message says what was wrong, what is accepted and what to do.

The CLI prints ``error: <message>`` on one line and exits with status 2; the dashboard shows the
message in the page. Anything that is not an :class:`IsoscopeError` is a bug.
"""

from __future__ import annotations


class IsoscopeError(Exception):
    """A problem the user can act on (bad input, unavailable model, unsupported analysis)."""


class InputError(IsoscopeError):
    """A text file, CSV, pasted text or option that cannot be used as given."""


class ModelLoadError(IsoscopeError):
    """A model source that cannot be loaded (missing, not cached offline, unsafe weights)."""


class UnsupportedModelError(IsoscopeError):
    """The model loaded, but lacks what an analysis needs (layers, norms, a position table)."""
