"""One thread-safe LRU for every in-memory store of isoscope (extraction results, memoised
analyses, uploaded files, opened saved analyses, full reports).

Plain Python (no Streamlit): the UI wraps one instance per store in ``st.cache_resource`` so that
every session of a server process shares it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class LRU:
    """At most ``size`` items and, with ``weigh``, at most ``max_bytes`` in total (the newest item is
    always kept, whatever it weighs). Every method holds one lock, so sessions on different threads
    can share an instance.

    ``get`` returns ``default`` (``None``) for a missing key, so a store cannot tell a stored
    ``None`` from a miss: do not store ``None``.
    """

    def __init__(
        self,
        size: int,
        max_bytes: int | None = None,
        weigh: Callable[[Any], int] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"an LRU holds at least one item, not size={size}")
        if max_bytes is not None and weigh is None:
            raise ValueError("max_bytes needs weigh (how many bytes an item takes)")
        self.size = size
        self.max_bytes = max_bytes
        self.weigh = weigh
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The item under ``key`` (now the most recently used), else ``default``."""
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` as the most recently used item; evict the oldest while over a limit."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while self._over():
                self._items.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def keys(self) -> list[Hashable]:
        """The keys, oldest first (a copy)."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def _over(self) -> bool:
        if len(self._items) > self.size:
            return True
        if self.max_bytes is None or self.weigh is None or len(self._items) <= 1:
            return False
        return sum(self.weigh(v) for v in self._items.values()) > self.max_bytes
