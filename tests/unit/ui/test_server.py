"""ui.server: the options reach Streamlit's bootstrap, and the prewarm starts before the server."""

from __future__ import annotations

from ui import server


def test_run_server_loads_options_starts_prewarm_then_serves(monkeypatch):
    from streamlit.web import bootstrap

    from ui import prewarm

    calls: list[tuple] = []
    monkeypatch.setattr(
        bootstrap, "load_config_options", lambda flag_options: calls.append(("load", flag_options))
    )
    monkeypatch.setattr(prewarm, "start", lambda models: calls.append(("prewarm", models)))
    monkeypatch.setattr(
        bootstrap, "run", lambda app, hello, args, flags: calls.append(("run", app, flags))
    )
    flags = {"server_port": 9999, "server_address": "127.0.0.1"}
    server.run_server("/x/app.py", flags, ["default"])
    assert calls == [("load", flags), ("prewarm", ["default"]), ("run", "/x/app.py", flags)]
    calls.clear()
    server.run_server("/x/app.py", flags, [])
    assert [c[0] for c in calls] == ["load", "run"]
