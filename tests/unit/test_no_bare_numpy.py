"""Tensors become arrays only through isoscope.engine.device.to_numpy (detach, move to the CPU, cast to a
dtype numpy has): a bare ``.numpy()`` breaks on CUDA/MPS tensors, on tensors that require grad and
on bfloat16. The one ``.numpy()`` allowed is inside ``to_numpy`` itself."""

from __future__ import annotations

import ast
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[2] / "backend"
ALLOWED = {("device.py", "to_numpy")}  # (file, enclosing function)


def _bare_numpy_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                else function
            )
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "numpy"
                and not child.args
                and (path.name, function) not in ALLOWED
            ):
                found.append(f"{path.relative_to(BACKEND.parent)}:{child.lineno}")
            visit(child, inner)

    visit(tree, None)
    return found


def test_no_bare_numpy_in_backend():
    calls = [hit for path in sorted(BACKEND.rglob("*.py")) for hit in _bare_numpy_calls(path)]
    assert not calls, "use isoscope.engine.device.to_numpy instead of .numpy() at " + ", ".join(
        calls
    )


def test_the_scan_finds_a_bare_call(tmp_path):
    """The detector itself: a planted ``.numpy()`` is reported, to_numpy(...) is not."""
    global BACKEND
    planted = tmp_path / "backend" / "planted.py"
    planted.parent.mkdir()
    planted.write_text("def f(t):\n    a = to_numpy(t)\n    return t.detach().numpy(), a\n")
    saved, BACKEND = BACKEND, planted.parent
    try:
        assert _bare_numpy_calls(planted) == ["backend/planted.py:3"]
    finally:
        BACKEND = saved
