"""One progress protocol: ``progress(done, total)`` from isoscope.engine.budget.progress, used by every
long computation (no module keeps its own ``Progress`` alias), the trajectory included."""

from __future__ import annotations

import ast
from pathlib import Path

from isoscope.engine.budget.progress import report

ROOT = Path(__file__).resolve().parents[4]


def test_no_backend_module_defines_its_own_progress_type():
    home = ROOT / "backend/engine/budget/progress.py"
    local = []
    for path in (ROOT / "backend").rglob("*.py"):
        if path == home:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "Progress" for t in targets):
                local.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert local == []


def test_report_calls_and_reads_a_stop_request():
    seen = []
    assert report(None, 1, 2)
    assert report(lambda d, t: seen.append((d, t)), 1, 2) and seen == [(1, 2)]
    assert not report(lambda d, t: False, 2, 2)


def test_the_trajectory_reports_checkpoints_done_of_total(tmp_path):
    """Checkpoints that fail to load still count; the label of each goes to on_checkpoint."""
    from isoscope.analysis.compare.trajectory import Checkpoint, run_trajectory
    from isoscope.engine.inputs.corpus import Corpus
    from isoscope.engine.store.cache import ResultCache

    checkpoints = [Checkpoint(s, tmp_path / f"checkpoint-{s}") for s in (10, 20)]
    calls, labels = [], []
    t = run_trajectory(
        checkpoints,
        Corpus(("a text",), "t"),
        cache=ResultCache(tmp_path / "cache"),
        progress=lambda done, total: calls.append((done, total)),
        on_checkpoint=labels.append,
    )
    assert calls == [(0, 2), (1, 2), (2, 2)]
    assert labels == ["[1/2] checkpoint-10 (step 10)", "[2/2] checkpoint-20 (step 20)"]
    assert t.points == [] and len(t.errors) == 2


def test_plain_functions_satisfy_the_protocol():
    from isoscope.engine.budget.progress import Progress

    def bar(done: int, total: int) -> bool | None:
        return None

    progress: Progress = bar  # a type checker accepts it; at run time it is just a callable
    assert report(progress, 0, 1)


def test_the_eta_comes_from_the_measured_rate():
    from isoscope.engine.budget.progress import eta_seconds, eta_text

    assert eta_seconds(0, 100, 5.0) is None and eta_text(0, 100, 5.0) == ""
    assert eta_seconds(25, 100, 10.0) == 30.0  # 2.5 units/s so far, 75 to go
    assert eta_text(25, 100, 10.0) == " · about 30 s left"
    assert eta_text(10, 100, 60.0) == " · about 9 min left"
    assert eta_text(100, 100, 60.0) == ""
    assert eta_text(0, 100, 5.0, estimate_s=45.0) == " · about 40 s left"  # the preflight's
    assert eta_text(25, 100, 10.0, estimate_s=45.0) == " · about 30 s left"  # then measured


def test_a_counter_reports_the_running_count_of_several_loops():
    from isoscope.engine.budget.progress import counter

    seen = []
    advance = counter(lambda done, total: seen.append((done, total)), 5)
    advance()
    advance(3)
    advance()
    assert seen == [(1, 5), (4, 5), (5, 5)]
    counter(None, 5)(2)  # no progress: nothing to report, nothing raised
