"""The atlas (issue 35) in Debian's Chromium: 100,000 points drawn with WebGL from a file the
frame fetches (not through the websocket), a hovered point shows its token in context, and the
data route serves a session's own token only (no other name, no path out of the folder)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from isoscope.ui.widgets.atlas import FRAME_SELECTOR
from tests.browser.atlas_app import NEEDLE
from tests.browser.test_smoke import CHROMIUM, CHROMIUM_ARGS, SERVER_START_S, _free_port

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "tests" / "browser" / "atlas_app.py"


def serve_atlas(folder: Path, **env: str):
    """``streamlit run tests/browser/atlas_app.py`` on a free port; (process, base URL)."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(APP),
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        env={**os.environ, "ISOSCOPE_CACHE_DIR": str(folder / "cache"), **env},
        stdout=(folder / "streamlit.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2):
                return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError((folder / "streamlit.log").read_text()[-3000:]) from None
            time.sleep(0.5)


def open_atlas(browser, base: str, timeout_s: float = 120):
    """A new page (its own Streamlit session) with the atlas drawn; (page, frame, frame element)."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(base, wait_until="domcontentloaded")
    element = page.wait_for_selector(FRAME_SELECTOR, timeout=timeout_s * 1000)
    frame = element.content_frame()
    frame.wait_for_selector('body[data-state="drawn"]', timeout=timeout_s * 1000)
    return page, frame, element


@pytest.fixture(scope="module")
def atlas_server(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    proc, base = serve_atlas(tmp_path_factory.mktemp("atlas"), ISOSCOPE_ATLAS_POINTS="100000")
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser(atlas_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def test_draws_100k_points_and_hovers_a_token_in_context(browser, atlas_server):
    page, frame, element = open_atlas(browser, atlas_server)
    assert frame.evaluate("() => atlas.ready") is True
    box = element.bounding_box()
    for panel in (0, 1):  # point 0 is alone at the corner of both panels
        x, y = frame.evaluate(f"() => atlas.screenOf({panel}, 0)")
        page.mouse.move(box["x"] + x, box["y"] + y)
        frame.wait_for_selector(f'body[data-hovered="{NEEDLE}"]', timeout=10_000)
        tip = frame.inner_text("#tip")
        assert f"[{NEEDLE}]" in tip and "text 0, position 0" in tip
    # a shift-drag lasso around the lone point in the right panel selects it alone, for both panels
    x, y = frame.evaluate("() => atlas.screenOf(1, 0)")
    x, y = box["x"] + x, box["y"] + y
    page.keyboard.down("Shift")
    page.mouse.move(x - 6, y - 6)
    page.mouse.down()
    for dx, dy in ((6, -6), (6, 6), (-6, 6), (-6, -6)):
        page.mouse.move(x + dx, y + dy, steps=3)
    page.mouse.up()
    page.keyboard.up("Shift")
    frame.wait_for_selector('body[data-selected="1"]', timeout=10_000)
    assert f"[{NEEDLE}]" in frame.inner_text("#selection")
    page.close()


def test_the_route_serves_a_sessions_own_points_only(browser, atlas_server):
    first, frame_a, _ = open_atlas(browser, atlas_server)
    second, frame_b, _ = open_atlas(browser, atlas_server)
    src_a = first.get_attribute(FRAME_SELECTOR, "src")
    src_b = second.get_attribute(FRAME_SELECTOR, "src")
    url_a, url_b = (
        f.evaluate(
            "() => performance.getEntriesByType('resource').map(e => e.name).filter(n => n.includes('/data/'))[0]"
        )
        for f in (frame_a, frame_b)
    )
    assert url_a != url_b  # every session has its own token, and never sees another's
    token_a = url_a.rsplit("/", 1)[1]
    assert token_a not in second.content() and token_a not in frame_b.content()
    assert "/cache/" not in url_a and os.sep + "tmp" not in url_a  # no server path in the URL
    fetch = "async (url) => (await fetch(url)).status"
    assert frame_b.evaluate(fetch, url_b) == 200
    folder = url_b.rsplit("/", 1)[0]
    assert frame_b.evaluate(fetch, folder + "/" + "A" * 32 + ".bin") == 404  # a guessed token
    read = "async (url) => { const r = await fetch(url); return [r.status, await r.text()]; }"
    for escape in ("/../../../../../../etc/passwd", "/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd"):
        status, text = frame_b.evaluate(read, folder + escape)
        assert "root:" not in text  # the browser or the route stops it; never the file
    status, text = frame_b.evaluate(read, folder + "/")
    assert status in (400, 403, 404) and url_a.rsplit("/", 1)[1] not in text  # no listing
    assert src_a and src_b
    first.close()
    second.close()


def test_a_drag_moves_the_drawn_frame_then_redraws_every_point_where_it_settled(
    browser, atlas_server
):
    page, frame, element = open_atlas(browser, atlas_server)
    box = element.bounding_box()
    x0, y0 = frame.evaluate("() => atlas.screenOf(0, 0)")
    start = (box["x"] + x0 - 150, box["y"] + y0 + 150)  # inside the panel, away from point 0
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(start[0] - 80, start[1] + 40, steps=8)
    moving = frame.evaluate("() => document.querySelector('canvas').style.transform")
    assert moving.startswith("translate(-80px, 40px)") or "translate(-80px,40px)" in moving
    page.mouse.up()
    frame.wait_for_function("() => document.querySelector('canvas').style.transform === ''")
    x1, y1 = frame.evaluate("() => atlas.screenOf(0, 0)")
    assert abs(x1 - (x0 - 80)) < 1 and abs(y1 - (y0 + 40)) < 1
    page.mouse.move(box["x"] + x1, box["y"] + y1)  # hover finds the point where it was redrawn
    frame.wait_for_selector(f'body[data-hovered="{NEEDLE}"]', timeout=10_000)
    assert "redrawn when the gesture stops" in frame.inner_text("#moving")
    # the scripted pan of the benchmark: one full draw when it settles, not one per frame
    moved = frame.evaluate("() => atlas.pan(20)")
    redrawn = frame.evaluate("() => atlas.pan(5, 'redraw')")
    assert len(moved["interval_ms"]) == 19 and len(moved["draw_ms"]) == 1
    assert len(redrawn["draw_ms"]) == 5
    page.close()
