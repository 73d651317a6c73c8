"""The house rules of the package layout: imports point down ``engine <- analysis <- plots <- share
<- commands / ui <- isoscope.ui.views <- pages``, and no two modules import each other, even through a
function-level import (a cycle closed that way is still a cycle). The CLI and the Streamlit glue
sit side by side (``isoscope serve`` starts the app and its prewarm); each page's view sits above
the shared glue and below its page (the rule is written at the top of ui/__init__.py). A page or
view never builds a memo key by hand, and runs analyses only through the cache idiom."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lower numbers sit lower: a module may import its own layer or any lower one.
LAYERS = {
    "isoscope.engine": 0,
    "isoscope.analysis": 1,
    "isoscope.plots": 2,
    "isoscope.share": 3,
    "isoscope.commands": 4,
    "isoscope.cli": 4,
    "isoscope.__main__": 4,
    "ui": 4,
    "isoscope.ui.views": 5,
    "pages": 6,
    "app": 6,
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
    assert layer("isoscope.engine.load.models") < layer("isoscope.share.report")
    assert layer("pages.outliers") > layer("isoscope.ui.frame.page") == layer("isoscope.commands.analyze")
    assert layer("pages.outliers") > layer("isoscope.ui.views.outliers") > layer("isoscope.ui.frame.page")


# Inside the engine each subpackage names a job. A module imports its own job, the vocabulary every
# job shares (the modules directly in backend/engine/) and the jobs ranked below its own: the
# architecture facts, then loading / inputs / time budgets side by side, then the extraction, then
# what stores and serves results.
ENGINE_VOCABULARY = {
    "errors",
    "params",
    "naming",
    "environment",
    "device",
    "lru",
    "jsonio",
    "allocator",
}
ENGINE_JOBS = {
    "arch": 1,
    "load": 2,
    "inputs": 2,
    "budget": 2,
    "extraction": 3,
    "store": 4,
    "serve": 4,
}


def engine_rank(module: str) -> int | None:
    """The rank of an engine module: 0 for the shared vocabulary, its job's rank otherwise, None
    for a module that belongs to neither."""
    parts = module.split(".")[2:]
    if len(parts) == 1 and parts[0] in ENGINE_VOCABULARY:
        return 0
    return ENGINE_JOBS.get(parts[0]) if parts else 0


ENGINE = sorted(m for m in MODULES if m.startswith("isoscope.engine."))


def test_every_engine_module_belongs_to_a_job_or_the_vocabulary():
    loose = [m for m in ENGINE if engine_rank(m) is None]
    assert loose == [], f"engine modules outside {sorted(ENGINE_JOBS)} and the vocabulary: {loose}"


def engine_upward(graph: dict[str, set[str]], module: str) -> list[str]:
    own = engine_rank(module)
    return sorted(
        d
        for d in graph[module]
        if d.startswith("isoscope.engine.") and (engine_rank(d) or 0) > (own or 0)
    )


@pytest.mark.parametrize("module", ENGINE)
def test_engine_imports_point_down_across_jobs(module):
    upward = engine_upward(GRAPH, module)
    assert upward == [], f"{module} imports a higher engine job: {upward}"


def test_the_engine_rule_catches_an_upward_import():
    planted = {
        **GRAPH,
        "isoscope.engine.load.hub": GRAPH["isoscope.engine.load.hub"]
        | {"isoscope.engine.store.cache"},
    }
    assert engine_upward(planted, "isoscope.engine.load.hub") == ["isoscope.engine.store.cache"]
    assert engine_rank("isoscope.engine.errors") == 0 and engine_rank("isoscope.engine.stray") is None


def view_page(module: str) -> str:
    """The page a view module belongs to: ``isoscope.ui.views.outliers`` for itself, ``isoscope.ui.views.positional``
    for each module of that page package."""
    return ".".join(module.split(".")[:3])


def view_crossings(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each view of ``graph`` that imports another page's view, with the views it imports (a
    module of a page package may import its siblings)."""
    crossing = {
        m: sorted(d for d in deps if d.startswith("isoscope.ui.views.") and view_page(d) != view_page(m))
        for m, deps in graph.items()
        if m.startswith("isoscope.ui.views.")
    }
    return {m: d for m, d in crossing.items() if d}


def test_views_import_no_other_view():
    """A view is its page's body: what two pages share belongs in ui/, not in one page's view."""
    assert view_crossings(GRAPH) == {}


def test_the_view_rule_catches_a_view_importing_another():
    planted = {**GRAPH, "isoscope.ui.views.outliers": GRAPH["isoscope.ui.views.outliers"] | {"isoscope.ui.views.similarity"}}
    assert view_crossings(planted) == {"isoscope.ui.views.outliers": ["isoscope.ui.views.similarity"]}


def test_the_view_rule_lets_a_page_package_import_its_siblings_only():
    probe = "isoscope.ui.views.positional.probe"
    assert "isoscope.ui.views.positional.shared" in GRAPH[probe]  # a sibling: allowed, and really used
    planted = {**GRAPH, probe: GRAPH[probe] | {"isoscope.ui.views.similarity", "isoscope.ui.views.layernorm"}}
    assert view_crossings(planted) == {probe: ["isoscope.ui.views.layernorm", "isoscope.ui.views.similarity"]}


# ----------------------------------------------------------------------------- the idiom module

IDIOM_MODULE = ROOT / "ui" / "work" / "cached.py"
# What ui/work/cached.py may define: the two decorators, their key rules and their type variables.
# Cached functions live in their view or, shared by several pages, in ui/work/results.py.
IDIOM_NAMES = {"cached", "heavy", "_key_of", "_arguments_key", "P", "R"}
IDIOM_DECORATORS = {"cached", "heavy"}


def idiom_module_extras(source: str) -> list[str]:
    """The top-level names ``source`` (the idiom module) defines beyond the idiom."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if name not in IDIOM_NAMES]


def test_the_idiom_module_defines_only_the_idiom():
    extras = idiom_module_extras(IDIOM_MODULE.read_text())
    assert extras == [], f"ui/work/cached.py defines more than the cache idiom: {extras}"


def test_the_idiom_rule_catches_a_page_function():
    planted = IDIOM_MODULE.read_text() + (
        "\nTHRESHOLD = 3\n\n\n@cached\ndef sts_scores(result):\n    return result\n"
    )
    assert idiom_module_extras(planted) == ["THRESHOLD", "sts_scores"]


def _names_imported_from_the_idiom_module() -> set[str]:
    names = set()
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "isoscope.ui.work.cached":
                names.update(alias.name for alias in node.names)
    return names - IDIOM_DECORATORS


def test_only_the_idiom_is_imported_from_the_idiom_module():
    """Modules import the decorators from isoscope.ui.work.cached and cached analyses from where they live."""
    assert _names_imported_from_the_idiom_module() == set()


# ----------------------------------------------------------------------------- the cache idiom

# Building a cache key by hand: the idiom (isoscope.ui.work.cached's @cached / @heavy) is the only caller.
HAND_KEYS = {"memo", "memo_heavy", "shared_run", "result_key", "extraction_key", "cache_key"}
HAND_KEYS |= {"comparison_cache_key", "WORK"}
# isoscope.analysis / isoscope.share functions a page may call outside the idiom because they run no
# analysis: input readers and parsers, facts about a model or result, and tables or lookups over a
# result that is already computed (and cached). Modules named ``summaries`` hold only the latter.
NOT_ANALYSES = {
    # readers and parsers of the user's input
    "read_pairs_csv", "read_word_sense_csv", "sts_sample", "wic_examples", "parse_dims",
    "resolve_checkpoints",
    # facts and labels
    "default_roles", "select_norms", "supports_tupe", "token_colour_options",
    "position_offset", "peak_state",
    # tables of a finished result
    "headline_dims", "strongest_dims", "extreme_dims_vs_outliers", "contribution_table",
    "comparison_report", "coordinates_frame",
    # a seeded choice of indices (which points or texts a view draws)
    "projection_sample",
    # a finished comparison's model cards set to what was opened now (isoscope.engine.store.provenance)
    "with_cards",
}  # fmt: skip
ANALYSIS_PACKAGES = ("isoscope.analysis", "isoscope.share")


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.add(target.id if isinstance(target, ast.Name) else getattr(target, "attr", ""))
    return names


def cache_idiom_breaches(source: str) -> list[str]:
    """What ``source`` (a page or view) does against the cache idiom: each hand-built key (an
    import or use of :data:`HAND_KEYS`) and each call of a ``isoscope.analysis`` /
    ``isoscope.share`` function outside a ``@cached`` / ``@heavy`` function, as "line: name"."""
    tree = ast.parse(source)
    analyses: dict[str, str] = {}  # local name -> module, for functions and modules imported
    breaches = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in HAND_KEYS:
                    breaches.append(f"{node.lineno}: imports {alias.name}")
                if node.module.startswith(ANALYSIS_PACKAGES) and not local[0].isupper():
                    analyses[local] = node.module

    def called_analysis(call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Name) and func.id in analyses:
            name, module = func.id, analyses[func.id]
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in analyses
        ):  # ``tour.outliers_step(...)`` after ``from isoscope.share import tour``
            name, module = func.attr, f"{analyses[func.value.id]}.{func.value.id}"
        else:
            return None
        if name[0].isupper() or name in NOT_ANALYSES or module.endswith(".summaries"):
            return None
        return name

    def visit(node: ast.AST, inside_idiom: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside_idiom = inside_idiom or bool(_decorator_names(node) & {"cached", "heavy"})
        if isinstance(node, ast.Name) and node.id in HAND_KEYS:
            breaches.append(f"{node.lineno}: uses {node.id}")
        if isinstance(node, ast.Call) and not inside_idiom:
            name = called_analysis(node)
            if name is not None:
                breaches.append(f"{node.lineno}: calls {name} uncached")
        for child in ast.iter_child_nodes(node):
            visit(child, inside_idiom)

    visit(tree, False)
    return breaches


FRONT = sorted(
    path.relative_to(ROOT).as_posix()
    for path in [*ROOT.glob("pages/*.py"), *ROOT.glob("ui/views/**/*.py")]
)


@pytest.mark.parametrize("path", FRONT)
def test_pages_and_views_keep_to_the_cache_idiom(path):
    breaches = cache_idiom_breaches((ROOT / path).read_text())
    assert breaches == [], f"{path} builds memo keys or runs analyses uncached: {breaches}"


def test_the_cache_idiom_rule_catches_a_hand_built_key_and_an_uncached_analysis():
    page = (
        "from isoscope.analysis.anisotropy import by_state\n"
        "from isoscope.analysis.projections.methods import token_colour_options\n"
        "from isoscope.share import tour\n"
        "from isoscope.ui.work.cached import cached\n"
        "from isoscope.ui.work.extraction import memo, result_key\n"
        "by_state(result)\n"
        "token_colour_options(result)\n"
        "tour.nope_step()\n"
        "step = memo('tour', (result_key(result),), lambda: 1)\n"
        "@cached\n"
        "def fine(result):\n"
        "    return by_state(result)\n"
    )
    assert cache_idiom_breaches(page) == [
        "5: imports memo",
        "5: imports result_key",
        "6: calls by_state uncached",
        "8: calls nope_step uncached",
        "9: uses memo",
        "9: uses result_key",
    ]


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
    """backend/analysis/massive/massive.py is tested in tests/<tier>/analysis/massive/test_massive.py:
    every module has a test file of its name somewhere under tests/."""
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


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_crossings(source: str, own: str) -> list[str]:
    """Private names (``_x``) that module ``own`` takes from another isoscope module: imported by
    name (``from m import _x``) or read off an imported module (``m._x``, ``import a.b as m``)."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> isoscope module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in ("backend", "ui", "pages"):
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.module}.{alias.name}")
                elif f"{node.module}.{alias.name}" in MODULES:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and modules[node.value.id] != own
            and _private(node.attr)
        ):
            found.append(f"{modules[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_private_name_crosses_a_module_boundary():
    """A name another module needs is public; ``_x`` stays inside the module that defines it."""
    crossings = {
        name: found
        for name, path in MODULES.items()
        if (found := private_crossings(path.read_text(), name))
    }
    assert crossings == {}


def test_the_private_rule_catches_an_import_and_an_attribute_read():
    source = (
        "from isoscope.engine.store.cache import _helper, cache_key\n"
        "from isoscope.engine.store import cache\n"
        "import isoscope.engine.store.saved as saved\n"
        "def f():\n"
        "    return cache._store, saved._index, cache.cache_key, saved.__name__\n"
    )
    assert private_crossings(source, "ui.x") == [
        "isoscope.engine.store.cache._helper",
        "isoscope.engine.store.cache._store",
        "isoscope.engine.store.saved._index",
    ]
