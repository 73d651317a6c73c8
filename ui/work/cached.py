"""The one cache idiom of the pages and views: ``@cached`` (heavy work ``@heavy``) memoises a
function process-wide, keyed by its qualified name and its arguments, so no page or view ever
builds a memo key by hand.

The key rules (:func:`_key_of`): an ExtractionResult is keyed by :func:`isoscope.ui.work.extraction.result_key`, a
LoadedModel by its fingerprint, a corpus or pairs by content hash, everything else by value; big
arrays are refused as keys; an argument named ``_x`` is left out. A cached function calls backend
functions only; one that passes its arguments through has the name of what it wraps (a memoised
:func:`isoscope.analysis.outliers.criteria_by_state` is ``criteria_by_state``), and one
that adapts them (fixes the pairs and seed, reads the texts from the result) is named for what it
returns.

Where cached functions live: a page's own in its view (``ui/views/<page>.py``), those several
pages share in :mod:`isoscope.ui.work.results`. This module defines only the idiom (tests/unit/test_architecture.py).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import numpy as np

from isoscope.engine.extraction import ExtractionResult
from isoscope.engine.inputs.corpus import Corpus
from isoscope.engine.inputs.media import MediaCorpus
from isoscope.engine.inputs.pairs import SentencePairs, WordSenseRows
from isoscope.engine.load.models import LoadedModel
from isoscope.ui.work.extraction import memo, memo_heavy, result_key

P = ParamSpec("P")
R = TypeVar("R")


def _key_of(value: Any) -> Any:
    if isinstance(value, ExtractionResult):
        return ("result", result_key(value))
    if isinstance(value, LoadedModel):
        return ("model", value.fingerprint)
    if isinstance(value, SentencePairs | WordSenseRows | MediaCorpus | Corpus):  # content hash
        return (type(value).__name__, value.sha)
    if isinstance(value, np.ndarray):
        raise TypeError("arrays are not cheap cache keys: pass the result and an index instead")
    if isinstance(value, list | tuple):
        return tuple(_key_of(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _key_of(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, repr(value))
    return value


def _arguments_key(signature: inspect.Signature, args: tuple, kwargs: dict) -> tuple:
    """The key of one call: every argument by name, except those whose name starts with an
    underscore (as ``st.cache_data`` does), which the other arguments already identify (a scan
    passed along beside the settings that made it)."""
    bound = signature.bind_partial(*args, **kwargs)
    bound.apply_defaults()  # f(x) and f(x, default) share one entry
    return tuple(
        (name, _key_of(v)) for name, v in bound.arguments.items() if not name.startswith("_")
    )


def cached(fn: Callable[P, R]) -> Callable[P, R]:
    """Memoise ``fn`` process-wide, keyed by its name and its (cheap) arguments."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        key = _arguments_key(signature, args, kwargs)
        return memo(name, key, lambda: fn(*args, **kwargs))

    return wrapper


def heavy(
    label: str | Callable[..., str], unit: str = ""
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """:func:`cached` for heavy work: ``fn(..., progress=...)`` runs once for every session in
    the server's fair queue (:func:`isoscope.ui.work.extraction.memo_heavy`), on a worker thread, so it must not
    call Streamlit; the waiting sessions show ``label`` (or ``label(*args, **kwargs)``, e.g. one
    naming the model) with the shared progress."""

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        name = f"{fn.__module__}.{fn.__qualname__}"
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            key = _arguments_key(signature, args, kwargs)
            text = label(*args, **kwargs) if callable(label) else label
            return memo_heavy(
                name, key, text, lambda progress: fn(*args, progress=progress, **kwargs), unit
            )

        return wrapper

    return decorate
