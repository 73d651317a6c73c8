"""ui/widgets/charts.py: the component folder it serves, the frame's page, and what a live chart sends."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from streamlit.testing.v1 import AppTest

import isoscope.ui.widgets.charts as charts


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(charts, "_served", None)
    return tmp_path


def test_served_folder_holds_the_page_and_the_installed_plotly_js(cache_dir):
    folder = charts.served_dir()
    assert folder.parent == cache_dir / "web"
    assert (folder / "index.html").read_bytes() == charts.PAGE.read_bytes()
    assert (folder / "plotly.min.js").read_bytes() == charts._plotly_js().read_bytes()
    assert list(folder.parent.iterdir()) == [folder]  # no staging folder left behind


def test_served_folder_is_written_once(cache_dir, monkeypatch):
    first = charts.served_dir()
    stamp = (first / "plotly.min.js").stat().st_mtime_ns
    monkeypatch.setattr(charts, "_served", None)  # as in a new server process
    assert charts.served_dir() == first
    assert (first / "plotly.min.js").stat().st_mtime_ns == stamp


def test_a_removed_or_incomplete_folder_is_written_again(cache_dir, monkeypatch):
    first = charts.served_dir()
    shutil.rmtree(first)
    assert (charts.served_dir() / "index.html").is_file()
    (first / "index.html").unlink()  # e.g. a crash while copying
    monkeypatch.setattr(charts, "_served", None)
    assert (charts.served_dir() / "index.html").read_bytes() == charts.PAGE.read_bytes()


def test_the_frame_updates_in_place_with_the_served_plotly():
    page = charts.PAGE.read_text(encoding="utf-8")
    assert "Plotly.react" in page and "Plotly.newPlot" not in page
    assert re.search(r'<script src="plotly\.min\.js">', page)  # the served copy, never a CDN
    assert "http" not in page
    assert "streamlit:componentReady" in page and "streamlit:setFrameHeight" in page
    assert 'data-state", "drawn"' in page  # what browser tests and benchmarks wait for


def test_live_chart_sends_the_figure_and_its_height(cache_dir):
    def app():
        import plotly.graph_objects as go

        from isoscope.ui.widgets.charts import live_chart

        live_chart(go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"height": 321}), key="k1")
        live_chart(go.Figure(go.Bar(x=[1], y=[2])), key="k2")

    at = AppTest.from_function(app).run()
    assert not at.exception
    els = at.get("component_instance")
    assert [e.proto.component_name for e in els] == ["isoscope.ui.widgets.charts.live_chart"] * 2
    args = [json.loads(e.proto.json_args) for e in els]
    assert [a["height"] for a in args] == [321, charts.DEFAULT_HEIGHT]
    assert json.loads(args[0]["spec"])["data"][0]["type"] == "scatter"
    assert json.loads(args[1]["spec"])["data"][0]["type"] == "bar"
    assert els[0].proto.id.endswith("-k1") and els[1].proto.id.endswith("-k2")


def test_an_unwritable_cache_falls_back_to_the_temp_folder(tmp_path, monkeypatch):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")  # mkdir below it fails
    monkeypatch.setenv("ISOSCOPE_CACHE_DIR", str(blocked))
    monkeypatch.setattr(charts, "_served", None)
    monkeypatch.setattr(charts.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    folder = charts.served_dir()
    assert folder.parent.parent == tmp_path / "tmp"
    assert (folder / "plotly.min.js").read_bytes() == charts._plotly_js().read_bytes()


def test_without_a_writable_folder_the_chart_is_streamlits_own(monkeypatch):
    def no_folder():
        raise OSError("read-only file system")

    monkeypatch.setattr(charts, "served_dir", no_folder)

    def app():
        import plotly.graph_objects as go

        from isoscope.ui.widgets.charts import live_chart

        live_chart(go.Figure(go.Bar(x=[1], y=[2])), key="k")

    at = AppTest.from_function(app).run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 1 and not at.get("component_instance")


def test_chart_with_downloads_draws_the_chart_then_its_downloads(cache_dir):
    def app():
        import pandas as pd
        import plotly.graph_objects as go

        from isoscope.ui.widgets.charts import chart_with_downloads

        fig = go.Figure(go.Bar(x=[1], y=[2]))
        chart_with_downloads(fig, key="own_chart", downloads="own", name="own")
        frame = pd.DataFrame({"a": [1.0]})
        chart_with_downloads(
            fig, key="live", downloads="both", frame=frame, json_data={"a": 1}, live=True
        )

    at = AppTest.from_function(app).run()
    assert not at.exception
    assert [e.proto.id.endswith("-own_chart") for e in at.get("plotly_chart")] == [True]
    live = at.get("component_instance")
    assert [e.proto.component_name for e in live] == ["isoscope.ui.widgets.charts.live_chart"]
    assert live[0].proto.id.endswith("-live")
    buttons = [e.proto.id.rsplit("-", 1)[-1] for e in at.get("download_button")]
    assert buttons == ["dl_png_own", "dl_png_both", "dl_csv_both", "dl_json_both"]
