"""Real browser: a Hub id typed in the sidebar downloads from the stand-in Hub
(tests/standin_hub.py, on 127.0.0.1) with a progress bar, then the Overview shows the model card
with the commit loaded."""

from __future__ import annotations

import pytest

from tests.browser.test_smoke import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGE_TIMEOUT_S,
    VIEWPORT,
    _serve,
    _wait_until_idle,
)
from tests.standin_hub import StandinHub, start

SMALL = "?page=overview&model=random:bert:layers%3D2,width%3D32,heads%3D2"  # a cheap first page


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory, tiny_bert_dir):
    hub = StandinHub()
    http = start(hub)
    sha = hub.add_folder("org/tiny-bert", tiny_bert_dir)
    hub.slow["model.safetensors"] = 6.0
    home = tmp_path_factory.mktemp("browser-hf")
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(home), "HF_HUB_OFFLINE": "0"}
    try:
        for served in _serve(tmp_path_factory, "browser-hub", TRANSFORMERS_OFFLINE="0", **env):
            yield {**served, "hub": hub, "sha": sha}
    finally:
        http.shutdown()
        http.server_close()


def test_a_typed_hub_id_shows_download_progress_then_the_overview(hub_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page(viewport=VIEWPORT)
            page.goto(hub_server["base"] + "/" + SMALL, wait_until="domcontentloaded")
            _wait_until_idle(page, PAGE_TIMEOUT_S)
            custom = page.locator(".st-key-sb_model_custom input").first
            custom.fill("org/tiny-bert")
            page.get_by_role("button", name="Run analysis").click()
            page.get_by_text("Downloading org/tiny-bert").first.wait_for(timeout=120_000)
            _wait_until_idle(page, PAGE_TIMEOUT_S)
            assert page.locator('[data-testid="stException"]').count() == 0
            assert "Overview" in page.locator("h1").first.inner_text()
            main = page.locator('[data-testid="stMain"]')
            assert main.get_by_text(hub_server["sha"]).count() >= 1  # "Hub revision"
            assert len(hub_server["hub"].downloads("model.safetensors")) == 1
        finally:
            chromium.close()
