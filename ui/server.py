"""Run the dashboard's Streamlit server in this process (``isoscope serve``), with the prewarm
thread started once the options are loaded, so it fills the caches the sessions will use."""

from __future__ import annotations


def run_server(app: str, flags: dict[str, object], prewarm_models: list[str]) -> None:
    """Streamlit's own ``streamlit run`` path (``bootstrap``), blocking until the server stops."""
    from streamlit.web import bootstrap

    bootstrap.load_config_options(flag_options=flags)
    if prewarm_models:
        from ui import prewarm

        prewarm.start(prewarm_models)
    bootstrap.run(app, False, [], flags)
