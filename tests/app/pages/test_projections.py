"""AppTest of the Clipping & projections page: default run, widget changes, a bad clip-dims entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.charts import charts

APP = str(Path(__file__).resolve().parents[3] / "app.py")


@pytest.fixture(autouse=True)
def _no_umap_warmup(monkeypatch):
    """Keep the background numba compilation off the test machine's CPUs."""
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "0")


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page("pages/projections.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_default_run_shows_both_panels_and_metric_deltas():
    at = open_page()
    assert not at.error
    assert at.selectbox(key="proj_post").value == "clip"
    typed = at.text_input(key=f"proj_clip_dims_{at.selectbox(key='proj_state').value}").value
    assert typed.strip(), "clip dims are pre-filled with the detected outliers"
    chart = charts(at)
    assert len(chart) == 1
    captions = " ".join(c.value for c in at.caption)
    assert " of " in captions and "tokens" in captions and "projected" in captions
    deltas = at.dataframe[0].value
    assert list(deltas["metric"])[:2] == [
        "anisotropy (mean cosine)",
        "top dimension's share of the mean cosine",
    ]
    assert (deltas["change"].abs() > 0).any()


def test_colour_post_processing_and_pooled_texts():
    at = open_page()
    at.selectbox(key="proj_colour_token sample").set_value("token").run()
    assert not at.exception
    at.selectbox(key="proj_post").set_value("standardize").run()
    assert not at.exception and not at.error
    at.number_input(key="proj_size_token sample").set_value(600).run()
    assert not at.exception
    assert any("600 of" in c.value for c in at.caption)
    at.radio(key="proj_data").set_value("mean-pooled texts").run()
    assert not at.exception and not at.error
    at.number_input(key="proj_size_mean-pooled texts").set_value(150).run()  # keep t-SNE quick
    at.selectbox(key="proj_method").set_value("tsne").run()
    assert not at.exception and not at.error
    assert len(charts(at)) == 1


def test_bad_clip_dims_show_an_error():
    at = open_page()
    state = at.selectbox(key="proj_state").value
    at.text_input(key=f"proj_clip_dims_{state}").set_value("223, banana").run()
    assert not at.exception
    assert at.error and "banana" in at.error[0].value
    at.text_input(key=f"proj_clip_dims_{state}").set_value("5000").run()
    assert at.error and "out of range" in at.error[0].value


def test_umap_shows_pca_and_progress_while_warming_up(monkeypatch):
    """While the background compilation runs, choosing UMAP shows PCA at once plus a progress bar."""
    import threading

    import isoscope.analysis.projections.methods
    from isoscope.ui.server.warmup import start_umap_warmup

    release = threading.Event()
    monkeypatch.setattr(
        isoscope.analysis.projections.methods, "warm_up_umap", lambda: release.wait(120) and 0.0
    )
    monkeypatch.setenv("ISOSCOPE_UMAP_WARMUP", "1")
    start_umap_warmup.clear()
    try:
        at = open_page()
        at.selectbox(key="proj_method").set_value("umap").run()
        assert not at.exception and not at.error
        fig = charts(at)[0].spec
        assert "PC1" in fig  # PCA is shown meanwhile
        assert any("UMAP is compiling" in (p.proto.text or "") for p in at.get("progress"))
    finally:
        release.set()
        start_umap_warmup.clear()


def test_the_warmup_compiles_the_statistics_kernel_before_umap(monkeypatch):
    """The background warm-up first compiles the moments kernel (seconds), then UMAP (a minute)."""
    import threading

    import isoscope.analysis.projections.methods
    import isoscope.engine.extraction.kernel
    from isoscope.ui.server.warmup import WarmupState, _run

    order = []

    class Kernel:
        def compile(self):
            order.append("statistics")
            return 1.0

    monkeypatch.setattr(isoscope.engine.extraction.kernel, "MOMENTS", Kernel())
    monkeypatch.setattr(
        isoscope.analysis.projections.methods, "warm_up_umap", lambda: order.append("umap") or 2.0
    )
    state = WarmupState()
    worker = threading.Thread(target=_run, args=(state,))  # it nices its own thread
    worker.start()
    worker.join(30)
    assert order == ["statistics", "umap"]
    assert state.ready and state.seconds == 2.0 and state.error is None
