"""Shared work on one server: identical work runs once, heavy work waits in a fair, bounded queue.

A classroom opens the same analysis 30 times at once. :class:`WorkQueue` makes that one run:

- **Single flight per key.** The first request for a key starts the computation; requests for the
  same key while it is queued or running wait for it and get the same result, or the same
  exception object (the same message for everyone). A finished flight is forgotten, so the next
  request after a failure retries; callers keep successful results in their own caches.
- **A bounded pool for heavy work** (extraction, comparison, report, scans, sweeps): at most
  ``workers`` heavy flights run at once, each on its own worker thread. Waiting flights are picked
  round-robin over their owners (sessions), so one session's ten sweeps do not hold back another
  session's first page. ``position`` tells a waiter how many analyses are ahead of it.
- **Light work** (``heavy=False``: derived analyses of a cached result) never queues: the first
  caller computes it in its own thread and the others wait on it.
- **Waiters may leave.** ``on_wait`` is called about every ``poll_s`` seconds in the waiting
  thread; if it raises (Streamlit stops a closed session's script that way), the waiter leaves.
  A queued flight that every waiter has left is dropped from the queue; a running one goes on,
  so a closed tab never cancels work that others wait for. Once nobody waits any more, the
  flight's ``progress`` returns False, which computations that can stop early take as a request
  to stop (their callers then must not keep the partial result: see ``Flight.abandoned``).
- **Control exceptions stay where they were raised.** A light computation runs in its first
  caller's thread; if it ends with a ``BaseException`` that is not an ``Exception`` (Streamlit's
  rerun/stop of that caller's script, ``KeyboardInterrupt``), only that caller gets it and the
  other waiters start the work again among themselves.

Plain Python (threads and locks), no Streamlit: ``isoscope.ui.work.queue`` holds one per server process.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from isoscope.engine.budget.progress import Progress

T = TypeVar("T")


@dataclass(frozen=True)
class WaitState:
    """What a waiter sees: its flight's progress, and while queued, its place in the queue."""

    key: str
    running: bool
    ahead: int  # queued heavy flights that start before this one (0 once running)
    busy: int  # heavy flights running now
    done: int
    total: int
    label: str


class _Flight:
    def __init__(self, key: str, compute: Callable[[Progress], Any], owner: str, label: str):
        self.key = key
        self.compute = compute
        self.owner = owner
        self.label = label
        self.state = "queued"  # queued -> running -> finished
        self.waiters = 0
        self.done = 0
        self.total = 0
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self.abandoned = False  # progress() answered False at least once

    def progress(self, done: int, total: int) -> bool:
        """The computation's ``progress(done, total)``: False once nobody waits for it."""
        self.done, self.total = int(done), int(total)
        if self.waiters <= 0:
            self.abandoned = True
            return False
        return True


class WorkQueue:
    """Single-flight, fair, bounded execution of keyed work (see the module docstring)."""

    def __init__(self, workers: int | None = None, poll_s: float = 0.25) -> None:
        workers = workers if workers is not None else (os.cpu_count() or 1)
        if workers < 1:
            raise ValueError(f"a work queue needs at least 1 worker, got {workers}")
        self.workers = int(workers)
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._queued: OrderedDict[str, deque[_Flight]] = OrderedDict()  # owner -> its flights
        self._running = 0
        self.runs = 0  # computations started (heavy and light), for tests and benchmarks

    # ------------------------------------------------------------------------- public

    def run(
        self,
        key: str,
        compute: Callable[[Progress], T],
        *,
        owner: str = "",
        heavy: bool = True,
        label: str = "",
        on_wait: Callable[[WaitState], None] | None = None,
    ) -> T:
        """``compute(progress)`` once per ``key`` however many threads ask at the same time."""
        while True:
            flight, lead = self._join(key, compute, owner, heavy, label)
            try:
                if lead and not heavy:
                    self._execute(flight)
                while not flight.finished.wait(self.poll_s):
                    if on_wait is not None:
                        on_wait(self.state_of(flight))
            finally:
                self._leave(flight)
            error = flight.error
            if error is None:
                return flight.result
            if isinstance(error, Exception) or lead or heavy:
                raise error
            # the leader's own control exception (its script was rerun or stopped): start again

    def _join(self, key, compute, owner, heavy, label) -> tuple[_Flight, bool]:
        with self._lock:
            flight = self._flights.get(key)
            lead = flight is None
            if flight is None:
                flight = _Flight(key, compute, owner, label)
                self._flights[key] = flight
                if heavy:
                    self._queued.setdefault(owner, deque()).append(flight)
                else:
                    flight.state = "running"
                    self.runs += 1
            flight.waiters += 1
            if heavy:
                self._dispatch()
            return flight, lead

    def state_of(self, flight: _Flight) -> WaitState:
        with self._lock:
            ahead = 0
            if flight.state == "queued":
                order = self._order()
                ahead = order.index(flight) if flight in order else 0
            return WaitState(
                flight.key,
                flight.state != "queued",
                ahead,
                self._running,
                flight.done,
                flight.total,
                flight.label,
            )

    def in_flight(self, key: str) -> bool:
        """Whether ``key`` is queued or running now (a new request would join it)."""
        with self._lock:
            return key in self._flights

    def pending(self) -> int:
        """Flights queued or running now."""
        with self._lock:
            return len(self._flights)

    # ------------------------------------------------------------------------- internals

    def _order(self) -> list[_Flight]:
        """Queued heavy flights in the order they will start: round-robin over owners."""
        queues = [list(q) for q in self._queued.values()]
        order: list[_Flight] = []
        for rank in range(max((len(q) for q in queues), default=0)):
            order += [q[rank] for q in queues if rank < len(q)]
        return order

    def _dispatch(self) -> None:  # holds self._lock
        while self._running < self.workers and self._queued:
            owner, queue = next(iter(self._queued.items()))
            flight = queue.popleft()
            del self._queued[owner]
            if queue:  # the owner's next flight goes to the back of the rotation
                self._queued[owner] = queue
            flight.state = "running"
            self._running += 1
            self.runs += 1
            thread = threading.Thread(
                target=self._work, args=(flight,), daemon=True, name=f"isoscope-work-{owner}"
            )
            thread.start()

    def _work(self, flight: _Flight) -> None:
        try:
            self._execute(flight)
        finally:
            with self._lock:
                self._running -= 1
                self._dispatch()

    def _execute(self, flight: _Flight) -> None:
        try:
            flight.result = flight.compute(flight.progress)
        except BaseException as exc:  # every waiter gets it, re-raised in its own thread
            flight.error = exc
        finally:
            with self._lock:
                flight.state = "finished"
                if self._flights.get(flight.key) is flight:
                    del self._flights[flight.key]  # the next request starts afresh
            flight.finished.set()

    def _leave(self, flight: _Flight) -> None:
        with self._lock:
            flight.waiters -= 1
            if flight.waiters > 0 or flight.state != "queued":
                return
            queue = self._queued.get(flight.owner)
            if queue is not None and flight in queue:
                queue.remove(flight)
                if not queue:
                    del self._queued[flight.owner]
            if self._flights.get(flight.key) is flight:
                del self._flights[flight.key]
