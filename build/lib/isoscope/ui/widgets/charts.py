"""Charts that stay mounted while a control changes their figure, and a chart with its
downloads (:func:`chart_with_downloads`).

``st.plotly_chart`` keys the browser element by a hash of the figure, so every change (another
colour, hidden state or post-processing) remounts the chart and Plotly draws it from scratch
(``newPlot``) inside the app's large document; for the projection page's two WebGL panels that
is most of a control change's time. :func:`live_chart` draws the figure in a
small component frame (``ui/widgets/frontend/live_chart.html``) that stays mounted under its key and
hands each new figure to ``Plotly.react``, which updates the plot in place.

A frame loads its own plotly.js, so arriving on a page costs more
per chart: use ``live_chart`` for charts that controls redraw and that are expensive to draw
from scratch (WebGL scatter panels, large heatmaps), ``st.plotly_chart`` for the rest.
``benchmarks/latency.py`` measures both.

plotly.js is the ``plotly.min.js`` of the installed plotly package, so the browser draws with the
plotly.js version Python wrote the figure for; the component folder (page plus plotly.js) is
written once to ``<isoscope cache>/web/`` and served by the app. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import plotly
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
import streamlit.components.v1 as components

from isoscope.engine.environment import default_cache_dir
from isoscope.ui.sharing.downloads import download_buttons

NAME = "live_chart"
PAGE = Path(__file__).resolve().parent / "frontend" / "live_chart.html"
DEFAULT_HEIGHT = 450

_served: Path | None = None


def _plotly_js() -> Path:
    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def _write_folder(target: Path) -> None:
    staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(_plotly_js(), staging / "plotly.min.js")
    (staging / "index.html").write_bytes(PAGE.read_bytes())
    shutil.rmtree(target, ignore_errors=True)  # a folder left incomplete
    try:
        staging.rename(target)
    except OSError:  # another server process wrote it first
        shutil.rmtree(staging, ignore_errors=True)


def served_dir() -> Path:
    """The component folder (``index.html`` and ``plotly.min.js``), written once per page and
    plotly version under the isoscope cache (or the temp folder when the cache is not
    writable); several server processes may race to write it."""
    global _served
    if _served is not None and (_served / "index.html").is_file():
        return _served
    tag = hashlib.sha256(PAGE.read_bytes() + plotly.__version__.encode()).hexdigest()[:12]
    name = f"{NAME}-{tag}"
    roots = (
        default_cache_dir() / "web",
        Path(tempfile.gettempdir()) / f"isoscope-web-{os.getuid()}",
    )
    for root in roots:
        target = root / name
        try:
            if not (target / "index.html").is_file():
                _write_folder(target)
        except OSError:
            continue
        if (target / "index.html").is_file():
            _served = target
            return target
    raise OSError(f"cannot write the chart component to {roots[0]} or {roots[1]}")


def live_chart(fig: go.Figure, *, key: str, height: int | None = None) -> None:
    """Draw ``fig`` full width under ``key``; a new figure under the same key updates the
    mounted chart in place. ``height``: pixels (default: the figure's layout height)."""
    try:
        folder = served_dir()
    except OSError:  # no writable folder for the component: Streamlit's own chart still works
        st.plotly_chart(fig, width="stretch", key=key)
        return
    component = components.declare_component(NAME, path=folder)
    chart_height = int(height or fig.layout.height or DEFAULT_HEIGHT)
    component(spec=pio.to_json(fig, validate=False), height=chart_height, key=key, default=None)


def chart_with_downloads(
    fig: go.Figure,
    *,
    key: str,
    downloads: str,
    frame: pd.DataFrame | None = None,
    json_data: Any = None,
    name: str = "isoscope",
    live: bool = False,
) -> None:
    """Draw ``fig`` full width under the widget key ``key`` (a :func:`live_chart` when ``live``),
    then its PNG and, when given, ``frame``'s CSV and ``json_data``'s JSON under the download key
    ``downloads`` (:func:`isoscope.ui.sharing.downloads.download_buttons`), files named ``name``."""
    if live:
        live_chart(fig, key=key)
    else:
        st.plotly_chart(fig, width="stretch", key=key)
    download_buttons(downloads, fig=fig, frame=frame, json_data=json_data, name=name)


# For browser tests and benchmarks: the frames of live charts (``page.frame_locator``), and a
# script returning ``[charts on the page, charts drawn]`` for both kinds of chart: Streamlit's own
# (drawn once Plotly has made its plot) and live charts (drawn once the frame's body says
# ``data-state="drawn"``, i.e. Plotly has drawn the latest figure).
FRAME_SELECTOR = f'iframe[title="isoscope.ui.widgets.charts.{NAME}"]'
CHARTS_DRAWN_JS = f"""() => {{
  const own = document.querySelectorAll('[data-testid="stPlotlyChart"]').length;
  const ownDrawn = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot').length;
  const frames = [...document.querySelectorAll('{FRAME_SELECTOR}')];
  const liveDrawn = frames.filter((f) => {{
    const body = f.contentDocument && f.contentDocument.body;
    return body && body.getAttribute('data-state') === 'drawn';
  }}).length;
  return [own + frames.length, ownDrawn + liveDrawn];
}}"""
