"""The house rules of the package layout: imports point down ``engine <- analysis <- plots <- share
<- commands / ui <- pages``, and no two modules import each other, even through a function-level
import (a cycle closed that way is still a cycle). The CLI and the Streamlit glue sit side by
side (``isoscope serve`` starts the app and its prewarm), the pages above both."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lower numbers sit lower: a module may import its own layer or any lower one.
LAYERS = {
    "backend.engine": 0,
    "backend.analysis": 1,
    "backend.plots": 2,
    "backend.share": 3,
    "backend.commands": 4,
    "backend.cli": 4,
    "backend.__main__": 4,
    "ui": 4,
    "pages": 5,
    "app": 5,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    files = [ROOT / "app.py", *ROOT.glob("pages/*.py")]
    for package in ("backend", "ui"):
        files += (ROOT / package).rglob("*.py")
    return {_module_name(f): f for f in files}


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every isoscope module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in MODULES)
    return found


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def layer(module: str) -> int | None:
    best = None
    for prefix, rank in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, rank)
    return None if best is None else best[1]


def test_every_backend_module_sits_in_a_layer():
    loose = [
        m
        for m in MODULES
        if m.startswith("backend.") and layer(m) is None and m != "backend.__init__"
    ]
    assert loose == [], f"modules outside engine/analysis/plots/share/commands: {loose}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    own = layer(module)
    if own is None:  # backend/__init__: the notebook API, lazy re-exports of every layer
        return
    upward = sorted(dep for dep in GRAPH[module] if (layer(dep) or 0) > own)
    assert upward == [], f"{module} (layer {own}) imports higher layers: {upward}"


def test_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(GRAPH.get(node, ())):
            if dep == node or dep == "backend":
                continue
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_layer_rule_catches_an_upward_import():
    """The check itself can fail: a planted engine -> share import is reported."""
    assert layer("backend.engine.models") < layer("backend.share.report")
    assert layer("pages.outliers") > layer("ui.common") == layer("backend.commands.analyze")


def _modules_without_a_test_file(root: Path) -> list[str]:
    """Modules of ``backend/``, ``ui/`` and ``pages/`` (not ``__init__``/``__main__``) with no
    ``test_<stem>.py`` anywhere under ``tests/``."""
    tests = {p.name for p in (root / "tests").rglob("test_*.py")}
    missing = []
    for top in ("backend", "ui", "pages"):
        for path in sorted((root / top).rglob("*.py")):
            if path.name in ("__init__.py", "__main__.py"):
                continue
            if f"test_{path.stem}.py" not in tests:
                missing.append(path.relative_to(root).as_posix())
    return missing


def test_every_module_has_a_test_file_named_after_it():
    """backend/analysis/decoder/massive.py is tested in tests/<tier>/analysis/decoder/test_massive.py
    (issue 23): every module has a test file of its name somewhere under tests/."""
    missing = _modules_without_a_test_file(ROOT)
    assert not missing, "modules without a test_<module>.py under tests/: " + ", ".join(missing)


def test_the_test_file_rule_names_a_module_without_one(tmp_path):
    for rel in ("backend/a/__init__.py", "backend/a/tested.py", "ui/lonely.py", "pages/p.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "tests" / "unit" / "a").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "a" / "test_tested.py").write_text("")
    (tmp_path / "tests" / "test_p.py").write_text("")
    assert _modules_without_a_test_file(tmp_path) == ["ui/lonely.py"]
