"""Run the dashboard's Streamlit server in this process (``isoscope serve``): the app's libraries
imported before the port opens, numpy's BLAS held to one thread, then the prewarm thread started
once the options are loaded, so it fills the caches the sessions will use."""

from __future__ import annotations

import ast
import importlib
import sys
import time
from pathlib import Path


def app_imports(app: str) -> list[str]:
    """The modules ``app.py`` and its ``pages/*.py`` import at their top level (a Streamlit page is
    a script that runs on every visit: its imports are what the first visitor would wait for),
    a page's view module too (``from isoscope.ui.views import outliers`` names ``isoscope.ui.views.outliers``)."""
    folder = Path(app).resolve().parent
    names: list[str] = []
    for script in [Path(app), *sorted((folder / "pages").glob("*.py"))]:
        try:
            tree = ast.parse(script.read_text(), filename=str(script))
        except (OSError, SyntaxError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                folders = _package_folders(node.module, folder)
                names += [
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if any(
                        (f / f"{alias.name}.py").is_file() or (f / alias.name).is_dir()
                        for f in folders
                    )
                ]
    return list(dict.fromkeys(n for n in names if n != "__future__"))


def _package_folders(module: str, app_folder: Path) -> list[Path]:
    """The folders of package ``module``: where the import system finds it (its parent packages
    are imported for that; the installed ``isoscope`` maps its subpackages to folders of their
    own), or a folder of that dotted path beside ``app.py``."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    found = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    found.append(app_folder.joinpath(*module.split(".")))
    return [f for f in found if f.is_dir()]


def preload(app: str) -> float:
    """Import what the pages import (torch and transformers with them) and the default model's
    modelling code, before the server listens; no analysis runs (that is the prewarm's job).
    Without it the first visitors of a fresh server wait for those imports. Returns the seconds
    taken."""
    started = time.perf_counter()
    for name in app_imports(app):
        try:
            importlib.import_module(name)
        except Exception:  # a page that cannot import shows its own error when opened
            continue
    from isoscope.engine.load.models import source_is_causal

    source_is_causal("default")  # the sidebar's first question: imports the model's class
    return time.perf_counter() - started


def one_blas_thread() -> None:
    """numpy's BLAS at one thread in the server: many sessions' threads share the cores, and a
    multi-threaded OpenBLAS call then spins against them, many times slower than on one thread
    (docs/performance.md). Torch keeps its own threads for the extraction."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def run_server(app: str, flags: dict[str, object], prewarm_models: list[str]) -> None:
    """Streamlit's own ``streamlit run`` path (``bootstrap``), blocking until the server stops."""
    from streamlit.web import bootstrap

    bootstrap.load_config_options(flag_options=flags)
    seconds = preload(app)
    one_blas_thread()
    sys.stderr.write(f"isoscope: libraries loaded ({seconds:.1f} s)\n")
    if prewarm_models:
        from isoscope.ui.server import prewarm

        prewarm.start(prewarm_models)
    bootstrap.run(app, False, [], flags)
