"""The one memo of what isoscope has worked out about a model: its traced forward pass
(:mod:`isoscope.engine.arch.tracing`), what it does to the probes of
:mod:`isoscope.engine.arch.behaviour` (causal, padding), whether it is causal
(:mod:`isoscope.engine.arch.causality`) and its layer pattern (:mod:`isoscope.engine.arch.mixers`).

Lifetime: the process. An entry is keyed by the model's fingerprint (a ``LoadedModel``), of which
the newest :data:`MODELS_KEPT` are kept; a bare ``torch.nn.Module`` has no fingerprint, so the
traced pass is also kept per module object, for as long as that module lives (a weak key). The
facts read here do not change while a model is loaded, so nothing else ever invalidates an entry;
:func:`forget_all` empties every memo (tests).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from isoscope.engine.lru import LRU

MODELS_KEPT = 64  # fingerprints remembered per fact


class ModelFacts:
    """One fact per model: per fingerprint (an LRU of :data:`MODELS_KEPT`) and, with
    ``per_module``, per module object of a bare model (weakly)."""

    def __init__(self, per_module: bool) -> None:
        self._by_key = LRU(MODELS_KEPT)
        self._by_module: weakref.WeakKeyDictionary | None = (
            weakref.WeakKeyDictionary() if per_module else None
        )

    def get_or_compute(self, model_or_loaded: Any, compute: Callable[[], Any]) -> Any:
        """The remembered fact of ``model_or_loaded``, else ``compute()`` (remembered)."""
        key = fingerprint_of(model_or_loaded)
        if key is not None and key in self._by_key:
            return self._by_key.get(key)
        model = getattr(model_or_loaded, "model", model_or_loaded)
        found = self._module_entry(model)
        if found is not None:
            return found
        value = compute()
        if key is not None:
            self._by_key.put(key, value)
        if self._by_module is not None:
            try:
                self._by_module[model] = value
            except TypeError:  # not weakly referenceable
                pass
        return value

    def _module_entry(self, model: Any) -> Any:
        if self._by_module is None:
            return None
        try:
            return self._by_module.get(model)
        except TypeError:
            return None

    def clear(self) -> None:
        self._by_key.clear()
        if self._by_module is not None:
            self._by_module.clear()


def fingerprint_of(model_or_loaded: Any) -> str | None:
    fingerprint = getattr(model_or_loaded, "fingerprint", None)
    return str(fingerprint) if fingerprint else None


TRACED = ModelFacts(per_module=True)
BEHAVIOUR = ModelFacts(per_module=True)
CAUSAL = ModelFacts(per_module=False)
MIXERS = ModelFacts(per_module=True)


def forget_all() -> None:
    """Empty every memo of model facts."""
    TRACED.clear()
    BEHAVIOUR.clear()
    CAUSAL.clear()
    MIXERS.clear()
