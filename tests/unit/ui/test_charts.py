"""ui/charts.py: the component folder it serves, the frame's page, and what a live chart sends."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from streamlit.testing.v1 import AppTest

import ui.charts as charts


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

        from ui.charts import live_chart

        live_chart(go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"height": 321}), key="k1")
        live_chart(go.Figure(go.Bar(x=[1], y=[2])), key="k2")

    at = AppTest.from_function(app).run()
    assert not at.exception
    els = at.get("component_instance")
    assert [e.proto.component_name for e in els] == ["ui.charts.live_chart"] * 2
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

        from ui.charts import live_chart

        live_chart(go.Figure(go.Bar(x=[1], y=[2])), key="k")

    at = AppTest.from_function(app).run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 1 and not at.get("component_instance")
