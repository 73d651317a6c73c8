"""Real-browser smoke test: `isoscope serve` (streamlit run app.py) driven by Debian's Chromium through Playwright.

Visits every page listed in ``app.PAGES`` whose file exists (pages added later are covered
automatically), waits for the script to finish and the Plotly charts to render, asserts that no
exception box is shown, and saves a screenshot per page to pytest's tmp dir and, when the env var
``ISOSCOPE_SCREENSHOTS`` names a folder, to ``<folder>/screenshot_<page>.png`` as well.
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from isoscope.ui.widgets.charts import CHARTS_DRAWN_JS, FRAME_SELECTOR

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 900}
SERVER_START_S = 120
PAGE_TIMEOUT_S = 300  # the first page loads the model and extracts the bundled corpus


def _pages_from_app() -> list[tuple[str, str]]:
    """(file stem, title) of every entry of app.PAGES whose file exists, in navigation order.

    Read with ast, so collecting this test never executes the Streamlit script."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "PAGES" for t in node.targets
        ):
            entries = ast.literal_eval(node.value)
            return [
                (Path(f).stem, title)
                for f, title, _icon in entries
                if (ROOT / "pages" / f).exists()
            ]
    raise AssertionError("app.py has no PAGES list")


PAGES = _pages_from_app()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`isoscope serve` on a free port with an isolated cache; terminated afterwards."""
    yield from _serve(tmp_path_factory, "browser")


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """The same server in shared mode (ISOSCOPE_SHARED=1), as a classroom gets it."""
    yield from _serve(tmp_path_factory, "browser-shared", ISOSCOPE_SHARED="1")


def _serve(tmp_path_factory, name: str, **extra_env: str):
    if os.environ.get("ISOSCOPE_REQUIRE_BROWSER") == "1":  # CI: .ci/run installed both, so run
        assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing although CI installs it"
        import playwright.sync_api  # noqa: F401
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"{CHROMIUM} is missing (apt-get install chromium); the browser smoke test needs it"
        )
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    port = _free_port()
    folder = tmp_path_factory.mktemp(name)
    log_path = folder / "streamlit.log"
    env = {
        **os.environ,
        "ISOSCOPE_CACHE_DIR": str(folder / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **extra_env,
    }
    log = log_path.open("w")
    proc = subprocess.Popen(
        # the way a user starts it: `isoscope serve` (python -m isoscope serve)
        # (no prewarm: each test's first page is its own measure of a cold server)
        [
            sys.executable,
            "-m",
            "backend",
            "serve",
            "--port",
            str(port),
            "--address",
            "127.0.0.1",
            "--prewarm",
            "off",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    f"streamlit exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"streamlit did not answer /_stcore/health in {SERVER_START_S} s"
                )
            time.sleep(0.5)
        yield {"base": base, "log": log_path}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _wait_until_idle(page, timeout_s: float) -> None:
    """Wait for the script run to finish: the app reports script state "notRunning" (the
    attribute Streamlit's own e2e tests wait on; the toolbar's status widget may be hidden), no
    spinner or running indicator is left, a title is shown, and every Plotly chart has drawn;
    all of it for a few consecutive polls, since a page may rerun itself once."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < 4:
        if time.monotonic() > deadline:
            state = page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
            raise AssertionError(
                f"the page did not finish within {timeout_s:.0f} s (script state {state})"
            )
        state = page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
        running = (
            state != "notRunning"
            or page.locator('[data-testid="stStatusWidget"]').count() > 0
            or page.locator('[data-testid="stSpinner"]').count() > 0
        )
        charts, drawn = page.evaluate(CHARTS_DRAWN_JS)
        titled = page.locator("h1").count() > 0
        quiet = quiet + 1 if (not running and titled and drawn >= charts) else 0
        time.sleep(0.5)


def _screenshot(page, name: str, tmp_path: Path) -> Path:
    """Full-length screenshot of the main area (Streamlit scrolls inside stMain, so the viewport
    is stretched to the content height first)."""
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    page.set_viewport_size(
        {"width": VIEWPORT["width"], "height": int(min(max(VIEWPORT["height"], height), 9000))}
    )
    page.wait_for_timeout(1500)  # Plotly redraws on resize
    path = tmp_path / f"screenshot_{name}.png"
    page.screenshot(path=str(path), full_page=True)
    target = os.environ.get("ISOSCOPE_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
    page.set_viewport_size(VIEWPORT)
    return path


def _open(browser, server, stem: str, query: str = ""):
    page = browser.new_page(viewport=VIEWPORT)
    url = server["base"] + ("/" if stem == PAGES[0][0] else f"/{stem}") + query
    page.goto(url, wait_until="domcontentloaded", timeout=60_000)
    try:
        _wait_until_idle(page, PAGE_TIMEOUT_S)
    except AssertionError as exc:
        page.close()
        raise AssertionError(
            f"{url}: {exc}\nserver log:\n{server['log'].read_text()[-3000:]}"
        ) from None
    return page


def _assert_no_exception(page, stem: str) -> None:
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, f"{stem}: exception shown:\n{boxes.first.inner_text()[:2000]}"


@pytest.mark.parametrize(("stem", "title"), PAGES, ids=[stem for stem, _ in PAGES])
def test_page_renders_without_exception(browser, server, stem, title, tmp_path):
    page = _open(browser, server, stem)
    try:
        _assert_no_exception(page, stem)
        assert page.locator("h1").first.inner_text().strip() != ""
        # The frame ran: the shared sidebar form is there on every page, deep links included.
        assert page.get_by_role("button", name="Run analysis").count() == 1, (
            f"{stem}: no sidebar form"
        )
        if stem == "outliers":
            heatmap = page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').first
            heatmap.wait_for(state="visible", timeout=60_000)
            assert heatmap.locator(".heatmaplayer, .hm, image").count() > 0
            assert "Outlier dimensions" in page.locator("h1").first.inner_text()
        if stem == "compare":  # MiniLM vs its random-init copy: the CKA heatmap is drawn
            heatmap = page.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').first
            heatmap.wait_for(state="visible", timeout=60_000)
            assert heatmap.locator(".heatmaplayer, .hm, image").count() > 0
            assert page.get_by_text("Linear CKA").count() >= 1
        if stem == "tour":
            assert page.get_by_text("Step 1 of 5").count() >= 1
            assert page.get_by_role("button", name="Next").count() == 1
            assert "page=tour" in page.url, (
                page.url
            )  # the URL reopens this view (ui/sharing/links.py)
        _screenshot(page, stem, tmp_path)
    finally:
        page.close()


def test_chart_updates_in_place(browser, server):
    """A control change reaches the mounted chart (Plotly.react in the same frame), not a new chart
    drawn from scratch: the frame counts the figures it drew (ui/widgets/charts.py)."""
    page = _open(browser, server, "projections")
    try:
        body = page.frame_locator(FRAME_SELECTOR).first.locator("body")
        assert body.get_attribute("data-renders") == "1"
        traces = "(b) => b.querySelector('.js-plotly-plot').data.map((t) => t.name).join('|')"
        before = body.evaluate(traces)
        assert body.locator("canvas").count() > 0  # WebGL scatter panels
        page.locator(".st-key-proj_colour_token-sample [role='combobox']").first.click()
        page.locator('[role="option"]:visible').filter(
            has_text="token (most frequent)"
        ).first.click()
        _wait_until_idle(page, PAGE_TIMEOUT_S)
        assert body.get_attribute("data-renders") == "2"
        assert body.get_attribute("data-state") == "drawn"
        assert body.evaluate(traces) != before  # the same plot now holds the new colouring
        _assert_no_exception(page, "projections")
    finally:
        page.close()


def test_shared_mode_overview_renders_without_the_operators_controls(browser, shared_server):
    """ISOSCOPE_SHARED=1: the Overview draws, and the sidebar has no pickle box, no cache
    settings and no saved-analysis path; a typed server path gets the one refusal text."""
    page = _open(browser, shared_server, "overview")
    try:
        _assert_no_exception(page, "overview (shared)")
        assert "Overview" in page.locator("h1").first.inner_text()
        sidebar = page.locator('[data-testid="stSidebar"]')
        assert sidebar.get_by_text("Allow pickle .bin weights").count() == 0
        assert sidebar.get_by_text("Disk cache settings").count() == 0
        assert sidebar.get_by_text("managed by its operator").count() == 1
        assert sidebar.get_by_text("its path on this machine").count() == 0
        custom = page.locator(".st-key-sb_model_custom input").first
        custom.fill("/etc")
        custom.press("Enter")
        sidebar.get_by_text("a path typed here is not opened").first.wait_for(timeout=60_000)
        _screenshot(page, "overview_shared", Path(shared_server["log"]).parent)
    finally:
        page.close()


def test_a_link_to_a_former_page_path_opens_the_page(browser, server):
    """A link shared while the Massive activations page was at /decoder (ui/sharing/links.py,
    PAGE_ALIASES): no "Page not found" dialog, the page draws, and the address bar names /massive."""
    model = "random:gpt2:layers%3D2,width%3D32,heads%3D2"
    page = _open(browser, server, "decoder", f"?page=decoder&model={model}&corpus=bundled")
    try:
        _assert_no_exception(page, "decoder (former path)")
        assert page.get_by_text("Page not found").count() == 0
        assert "Massive activations" in page.locator("h1").first.inner_text()
        assert "/massive" in page.url and "page=massive" in page.url, page.url
    finally:
        page.close()


def test_an_image_analysis_opens_from_a_link(browser, server, tmp_path):
    """A link to a small random ViT on the bundled demo images (ui/sharing/links.py): the Overview runs
    the image analysis and draws without an exception; the corpus is the demo set, the model a
    ViT."""
    query = "?page=overview&model=random:vit:layers%3D2,width%3D32,heads%3D2&corpus=images"
    page = _open(browser, server, "overview", query)
    try:
        _assert_no_exception(page, "overview (images)")
        assert "Overview" in page.locator("h1").first.inner_text()
        main = page.locator('[data-testid="stMain"]')
        assert main.get_by_text("bundled sample images").count() >= 1, "not the demo images"
        assert main.get_by_text("ViTModel").count() >= 1, "not the ViT"
        assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1
        _screenshot(page, "overview_images", tmp_path)
    finally:
        page.close()


@pytest.fixture(scope="module")
def recent_folders(tmp_path_factory):
    from tests import zoo_recent

    root = tmp_path_factory.mktemp("recent")
    kinds = (zoo_recent.HYBRID, zoo_recent.SSM, zoo_recent.MLA, zoo_recent.ALTUP)
    return {family: zoo_recent.build(family, root / family) for family in kinds}


@pytest.mark.parametrize("family", ["qwen3_5_text", "mamba2", "deepseek_v3", "gemma3n_text"])
@pytest.mark.parametrize("stem", ["overview", "massive"])
def test_a_recent_family_opens_from_a_link(browser, server, recent_folders, family, stem, tmp_path):
    """A hybrid (Gated DeltaNet + attention), a state-space model, multi-head latent attention and
    Gemma 3n's AltUp streams, linked with a pasted corpus: the Overview (whose card names the
    layer pattern) and the massive-activations page draw without an exception box."""
    from urllib.parse import quote

    texts = quote("the cat sat on the w3 . w7 w9\na dog , the w1 w2 w5 sat !\nthe w4 .")
    query = f"?page={stem}&model={quote(str(recent_folders[family]))}&corpus=paste&texts={texts}"
    page = _open(browser, server, stem, query)
    try:
        _assert_no_exception(page, f"{stem} ({family})")
        main = page.locator('[data-testid="stMain"]')
        assert main.get_by_text("unexpected error").count() == 0
        if stem == "overview":
            assert main.get_by_text("4 layers: ").count() >= 1, "no layer pattern on the card"
        _screenshot(page, f"{stem}_{family}", tmp_path)
    finally:
        page.close()
