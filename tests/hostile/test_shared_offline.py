"""A shared server in a real browser (Debian's Chromium, driven by Playwright): a crafted link with
Markdown and HTML in every query parameter puts no link or image inside isoscope's notices, and
the page asks nothing of any host but the server (the tab's icon and the fonts are the server's;
a Material icon as the page icon would have sent every visitor's browser to Google's font CDN).

Started the way ``tests/browser/test_smoke.py`` starts a server (``isoscope serve``, no prewarm);
skipped where ``/usr/bin/chromium`` or Playwright is missing (in CI both are installed)."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import pytest

from tests.browser.test_smoke import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, _serve, _wait_until_idle

PAYLOADS = {
    "model": "[your session expired: sign in again](http://evil.example/login)",
    "page": "![](http://evil.example/pixel-page.png)",
    "state": "<img src=http://evil.example/pixel-state.png>",
    "out_thr_z": "<a href='http://evil.example/z'>sign in</a>",
    "texts": "www.evil.example/login :red[ALERT] :material/lock: $x$",
    "model_b": "<http://evil.example/auto>",
    "folder": "[folder](http://evil.example/folder)",
}
PAGE_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    yield from _serve(tmp_path_factory, "hostile-shared", ISOSCOPE_SHARED="1")


@pytest.fixture(scope="module")
def chromium(shared_server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _open(chromium, base: str, query: str) -> tuple[object, list[str]]:
    """The page at ``base/?query`` once its script has finished, and every URL it requested."""
    page = chromium.new_page(viewport=VIEWPORT)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("websocket", lambda socket: requested.append(socket.url))
    page.goto(f"{base}/?{query}", wait_until="domcontentloaded", timeout=60_000)
    _wait_until_idle(page, PAGE_TIMEOUT_S)
    return page, requested


def _foreign(urls: list[str], base: str) -> list[str]:
    host = urlsplit(base).netloc
    return [u for u in urls if urlsplit(u).scheme not in ("data", "blob", "about")
            and urlsplit(u).netloc != host]  # fmt: skip


def test_a_crafted_link_injects_nothing_and_nothing_leaves_the_host(chromium, shared_server):
    base = shared_server["base"]
    query = urlencode({"corpus": "paste", **PAYLOADS})
    page, requested = _open(chromium, base, query)
    try:
        # the notices that quote the link (isoscope's own notices may hold links of their own)
        notices = page.locator('[data-testid="stAlert"]').filter(has_text="evil.example")
        assert notices.count() >= 1
        text = " ".join(notices.all_inner_texts()).replace("\u200b", "")  # literal()'s spaces
        assert PAYLOADS["model"] in text and PAYLOADS["page"] in text, text  # shown as typed
        injected = notices.locator("a, img, script, iframe")
        assert injected.count() == 0, injected.evaluate_all("els => els.map(e => e.outerHTML)")
        # nowhere on the page: a link or an image that points at the payloads' host
        assert page.locator('[href*="evil"], [src*="evil"]').count() == 0
        assert page.locator('[data-testid="stException"]').count() == 0
        icons = page.eval_on_selector_all(
            'link[rel~="icon"], link[rel="shortcut icon"]', "els => els.map(e => e.href)"
        )
        assert icons and not _foreign(icons, base), icons
        assert not _foreign(requested, base), _foreign(requested, base)
        assert not [u for u in requested if "evil" in urlsplit(u).netloc]
    finally:
        page.close()
