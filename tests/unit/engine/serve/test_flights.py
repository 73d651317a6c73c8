"""WorkQueue: identical work once, the same result or error for every waiter, a fair bounded
queue whose waiters see their place, and waiters that leave without cancelling anyone's work."""

from __future__ import annotations

import threading
import time

import pytest

from isoscope.engine.serve.flights import WorkQueue


class Gate:
    """A computation that blocks until released, counting its runs."""

    def __init__(self, value="result", error: BaseException | None = None):
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls = 0
        self.value = value
        self.error = error

    def __call__(self, progress):
        self.calls += 1
        self.started.set()
        progress(1, 2)
        assert self.release.wait(10)
        if self.error is not None:
            raise self.error
        progress(2, 2)
        return self.value


def _in_threads(n, target):
    results: list = [None] * n
    errors: list = [None] * n

    def one(i):
        try:
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results, errors


@pytest.mark.parametrize("heavy", [True, False])
def test_concurrent_requests_for_one_key_compute_once(heavy):
    queue = WorkQueue(workers=2, poll_s=0.01)
    gate = Gate()
    threads, results, errors = _in_threads(
        6, lambda i: queue.run("k", gate, owner=f"s{i}", heavy=heavy)
    )
    assert gate.started.wait(5)
    time.sleep(0.1)  # let every thread join the flight
    gate.release.set()
    for t in threads:
        t.join(10)
    assert gate.calls == 1 and queue.runs == 1
    assert results == ["result"] * 6 and errors == [None] * 6
    assert queue.pending() == 0


def test_a_failure_reaches_every_waiter_and_the_next_request_retries():
    queue = WorkQueue(workers=1, poll_s=0.01)
    failure = ValueError("texts.txt has no text")
    gate = Gate(error=failure)
    threads, _, errors = _in_threads(3, lambda i: queue.run("k", gate, owner=f"s{i}"))
    assert gate.started.wait(5)
    time.sleep(0.1)
    gate.release.set()
    for t in threads:
        t.join(10)
    assert all(e is failure for e in errors)
    assert queue.run("k", lambda progress: "second try") == "second try"


def test_heavy_work_is_bounded_and_waiters_see_their_place():
    queue = WorkQueue(workers=1, poll_s=0.01)
    first = Gate("a")
    seen: list = []
    t1, r1, _ = _in_threads(1, lambda i: queue.run("a", first, owner="s1"))
    assert first.started.wait(5)
    second = Gate("b")
    t2, r2, _ = _in_threads(1, lambda i: queue.run("b", second, owner="s2", on_wait=seen.append))
    time.sleep(0.15)
    assert not second.started.is_set()  # one worker: b waits behind a
    assert seen and not seen[-1].running and seen[-1].ahead == 0 and seen[-1].busy == 1
    first.release.set()
    assert second.started.wait(5)
    time.sleep(0.1)  # the waiter polls while b runs
    second.release.set()
    for t in t1 + t2:
        t.join(10)
    assert r1 == ["a"] and r2 == ["b"]
    assert any(s.running and s.done == 1 and s.total == 2 for s in seen)


def test_round_robin_over_sessions():
    """Session A queues three runs, then B one: B's starts second, not fourth."""
    queue = WorkQueue(workers=1, poll_s=0.01)
    blocker = Gate()
    order: list[str] = []
    tb, _, _ = _in_threads(1, lambda i: queue.run("block", blocker, owner="x"))
    assert blocker.started.wait(5)

    def job(name):
        def compute(progress):
            order.append(name)
            return name

        return compute

    threads = []
    for name, owner in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B")]:
        t, _, _ = _in_threads(1, lambda i, n=name, o=owner: queue.run(n, job(n), owner=o))
        threads += t
        time.sleep(0.05)
    states = {f.key: queue.state_of(f).ahead for q in queue._queued.values() for f in q}
    assert states == {"a1": 0, "b1": 1, "a2": 2, "a3": 3}
    blocker.release.set()
    for t in threads + tb:
        t.join(10)
    assert order == ["a1", "b1", "a2", "a3"]


class Closed(Exception):
    """What Streamlit raises in a closed session's script thread."""


def test_a_waiter_that_leaves_a_queued_flight_drops_it():
    queue = WorkQueue(workers=1, poll_s=0.01)
    blocker = Gate()
    tb, _, _ = _in_threads(1, lambda i: queue.run("block", blocker, owner="x"))
    assert blocker.started.wait(5)
    never = Gate()

    def leave(state):
        raise Closed

    with pytest.raises(Closed):
        queue.run("queued", never, owner="gone", on_wait=leave)
    assert queue.pending() == 1  # only the running blocker is left
    blocker.release.set()
    for t in tb:
        t.join(10)
    time.sleep(0.05)
    assert never.calls == 0


def test_a_cancelled_waiter_does_not_cancel_the_computation():
    queue = WorkQueue(workers=1, poll_s=0.01)
    gate = Gate("kept")
    calls = {"n": 0}

    def leave_once_running(state):
        calls["n"] += 1
        if state.running:
            raise Closed

    t_stay, r_stay, _ = _in_threads(1, lambda i: queue.run("k", gate, owner="stay"))
    assert gate.started.wait(5)
    with pytest.raises(Closed):
        queue.run("k", gate, owner="leave", on_wait=leave_once_running)
    gate.release.set()
    for t in t_stay:
        t.join(10)
    assert r_stay == ["kept"] and gate.calls == 1


def test_needs_a_worker():
    with pytest.raises(ValueError):
        WorkQueue(workers=0)


class ScriptRerun(BaseException):
    """Like Streamlit's RerunException: a control exception of one session's script thread."""


def test_a_leaders_control_exception_stays_with_it_and_the_others_start_again():
    queue = WorkQueue(workers=1, poll_s=0.01)
    leader_in = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    def leader_compute(progress):
        calls.append("leader")
        leader_in.set()
        assert release.wait(10)
        raise ScriptRerun  # the leader's own session was rerun mid-computation

    def waiter_compute(progress):
        calls.append("waiter")
        return "computed again"

    tl, _, el = _in_threads(1, lambda i: queue.run("k", leader_compute, heavy=False))
    assert leader_in.wait(5)
    tw, rw, ew = _in_threads(1, lambda i: queue.run("k", waiter_compute, heavy=False))
    time.sleep(0.1)
    release.set()
    for t in tl + tw:
        t.join(10)
    assert isinstance(el[0], ScriptRerun)
    assert ew == [None] and rw == ["computed again"] and calls == ["leader", "waiter"]


def test_progress_answers_false_once_nobody_waits():
    queue = WorkQueue(workers=1, poll_s=0.01)
    answers: list[bool] = []
    leave = threading.Event()
    finish = threading.Event()

    def compute(progress):
        answers.append(progress(1, 3))
        leave.set()
        assert finish.wait(10)
        answers.append(progress(2, 3))
        return "partial"

    def on_wait(state):
        if leave.is_set():
            raise Closed

    with pytest.raises(Closed):
        queue.run("k", compute, owner="gone", on_wait=on_wait)
    finish.set()
    deadline = time.monotonic() + 5
    while len(answers) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert answers == [True, False]
