"""isoscope.ui.server.process: the app's imports are found and loaded before the port opens, numpy's BLAS is held
to one thread, the options reach Streamlit's bootstrap, and the prewarm starts before the server."""

from __future__ import annotations

import sys

from isoscope.ui.server import process


def test_run_server_loads_options_preloads_starts_prewarm_then_serves(monkeypatch):
    from streamlit.web import bootstrap

    from isoscope.ui.server import prewarm

    calls: list[tuple] = []
    monkeypatch.setattr(
        bootstrap, "load_config_options", lambda flag_options: calls.append(("load", flag_options))
    )
    monkeypatch.setattr(process, "preload", lambda app: calls.append(("preload", app)) or 0.0)
    monkeypatch.setattr(process, "one_blas_thread", lambda: calls.append(("blas",)))
    monkeypatch.setattr(prewarm, "start", lambda models: calls.append(("prewarm", models)))
    monkeypatch.setattr(
        bootstrap, "run", lambda app, hello, args, flags: calls.append(("run", app, flags))
    )
    flags = {"server_port": 9999, "server_address": "127.0.0.1"}
    process.run_server("/x/app.py", flags, ["default"])
    assert calls == [
        ("load", flags),
        ("preload", "/x/app.py"),
        ("blas",),
        ("prewarm", ["default"]),
        ("run", "/x/app.py", flags),
    ]
    calls.clear()
    process.run_server("/x/app.py", flags, [])
    assert [c[0] for c in calls] == ["load", "preload", "blas", "run"]


def test_app_imports_reads_the_app_and_every_page(tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "app.py").write_text(
        "from __future__ import annotations\nimport json\nfrom ui.common import x\n"
    )
    (tmp_path / "pages" / "a.py").write_text("import os.path, csv\nfrom . import sibling\n")
    (tmp_path / "pages" / "b.py").write_text("def f(:\n")  # a broken page is skipped
    (tmp_path / "pages" / "c.py").write_text("def g():\n    import never_at_top\nimport json\n")
    assert process.app_imports(str(tmp_path / "app.py")) == ["json", "ui.common", "os.path", "csv"]


def test_app_imports_names_a_page_view_module(tmp_path):
    """``from isoscope.ui.views import a`` imports the module ui/views/a.py, which preload must import too
    (importing the package ``isoscope.ui.views`` alone would load none of the page's code)."""
    (tmp_path / "pages").mkdir()
    (tmp_path / "ui" / "views").mkdir(parents=True)
    (tmp_path / "ui" / "views" / "a.py").write_text("")
    (tmp_path / "app.py").write_text("")
    (tmp_path / "pages" / "p.py").write_text("from isoscope.ui.views import a, not_a_module\n")
    assert process.app_imports(str(tmp_path / "app.py")) == ["isoscope.ui.views", "isoscope.ui.views.a"]


def test_the_real_app_imports_the_ui_and_every_view():
    root = process.Path(__file__).resolve().parents[3]
    names = process.app_imports(str(root / "app.py"))
    assert "isoscope.ui.frame.page" in names and "streamlit" in names
    folder = root / "ui" / "views"
    packages = [p.parent for p in folder.glob("[!_]*/__init__.py")]  # a page package: its own
    views = {f"isoscope.ui.views.{p.stem}" for p in [*folder.glob("[!_]*.py"), *packages]}
    assert views <= set(names), f"views no page imports: {sorted(views - set(names))}"


def test_preload_imports_every_module_it_finds(monkeypatch, tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "app.py").write_text("import isoscope_preload_probe\nimport no_such_module_xyz\n")
    (tmp_path / "isoscope_preload_probe.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "isoscope_preload_probe", raising=False)
    seconds = process.preload(str(tmp_path / "app.py"))  # the missing module is skipped
    assert sys.modules["isoscope_preload_probe"].LOADED is True
    assert seconds >= 0


def test_one_blas_thread_limits_numpy_blas():
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=None):  # the original limits are restored on leaving
        process.one_blas_thread()
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
