"""Benchmark: interaction latency as a person feels it, in a real browser. Prints JSON to stdout.

    .venv/bin/python benchmarks/latency.py [--port 8613] [--repeats 5] [--pages outliers ...]

Starts ``streamlit run app.py`` (bundled model and corpus, the default on-disk extraction cache,
UMAP warm-up off) and drives it with Debian's Chromium through Playwright. For each page it first
runs every action once (warm caches), then times each action ``--repeats`` times, alternating
between two values so that every timed change is a real change with warm caches.

A time runs from just before the browser input (a click; a key press; for a selectbox the click on
the option, its dropdown already open) to the moment the app is idle
again with its charts drawn: the app's script state went to "running" and back to "notRunning"
(also for fragment reruns), and the page's DOM then stayed unchanged for ``QUIET_MS``; the time
reported is that of the last change (script state or DOM mutation, e.g. Plotly redrawing its SVG),
so the quiet window itself is not counted. Page switches click the sidebar navigation after every
page was visited once. Targets: control change <= 0.5 s median and <= 1 s worst; page
switch <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.ui.widgets.charts import CHARTS_DRAWN_JS  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1400, "height": 900}
QUIET_MS = 400
ACTION_TIMEOUT_S = 120.0
TARGETS = {"control_median_s": 0.5, "control_worst_s": 1.0, "page_switch_s": 1.0}

# Records script-state transitions and DOM mutations with performance.now() timestamps.
INIT_SCRIPT = """
if (window !== window.top) {
  // A live chart's frame (ui/widgets/charts.py): its DOM changes count as the app's.
  const mark = () => { try { window.top.__iso.lastMutation = window.top.performance.now(); } catch (e) {} };
  document.addEventListener('DOMContentLoaded', () => {
    new MutationObserver(mark).observe(document.documentElement,
      {subtree: true, childList: true, attributes: true, characterData: true});
  });
} else {
window.__iso = {states: [], lastMutation: 0};
const watch = () => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) { setTimeout(watch, 50); return; }
  window.__iso.states.push([app.getAttribute('data-test-script-state'), performance.now()]);
  // Observer callbacks come in batches: a rerun faster than one batch shows up as two records,
  // and the attribute is then already back at "notRunning". Each record's value is the next
  // record's oldValue (or the current value for the last one), so no transition is lost.
  new MutationObserver((records) => {
    const now = performance.now();
    records.forEach((r, i) => {
      const value = i + 1 < records.length ? records[i + 1].oldValue
        : app.getAttribute('data-test-script-state');
      window.__iso.states.push([value, now]);
    });
  }).observe(app, {attributes: true, attributeOldValue: true,
                   attributeFilter: ['data-test-script-state']});
  new MutationObserver(() => { window.__iso.lastMutation = performance.now(); })
    .observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
};
watch();
}
"""

# Done when: a "running" state after t0, then "notRunning", every chart is drawn (Streamlit's and
# live charts, ui/widgets/charts.py), no stale element, and no DOM change (frames included) for QUIET_MS.
# Returns the time of the last change, or null.
DONE_JS = """
([t0, quietMs]) => {
  const iso = window.__iso;
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return null;
  const after = iso.states.filter(([s, t]) => t >= t0);
  const ran = after.findIndex(([s]) => s === 'running');
  if (ran < 0) return null;
  const stopped = after.slice(ran).filter(([s]) => s === 'notRunning');
  if (!stopped.length) return null;
  const [charts, drawn] = (CHARTS_DRAWN)();
  if (drawn < charts) return null;
  if (document.querySelector('[data-stale="true"]')) return null;
  if (document.querySelector('[data-testid="stSpinner"]')) return null;
  const last = Math.max(stopped[stopped.length - 1][1], iso.lastMutation);
  if (performance.now() - last < quietMs) return null;
  return last;
}
""".replace("CHARTS_DRAWN", CHARTS_DRAWN_JS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "ISOSCOPE_UMAP_WARMUP": "0", "HF_HUB_OFFLINE": "1"}
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("streamlit did not start in 120 s")


RECEIVED = [0]  # bytes of app messages the page received (websocket frames + cached messages)


def count_bytes(page) -> None:
    """Add every websocket frame the page receives to RECEIVED, and the large messages that
    Streamlit sends by reference and the browser fetches over HTTP (``/_stcore/message``)."""

    def add(n: int) -> None:
        RECEIVED[0] += n

    def on_socket(ws) -> None:
        ws.on("framereceived", lambda payload: add(len(payload)))

    def on_response(response) -> None:
        if "/_stcore/message" in response.url:
            add(int(response.headers.get("content-length") or 0))

    page.on("websocket", on_socket)
    page.on("response", on_response)


NO_RERUN_S = 5.0  # an input that started no rerun in this time was lost


class LostInput(TimeoutError):
    """The browser showed the input, but no rerun started."""


def timed(
    page, act: Callable[[], None], timeout_s: float = ACTION_TIMEOUT_S, since_load: bool = False
) -> float:
    """Seconds from just before ``act()`` (or from the page load) until the app is idle with its
    charts drawn. The bytes received meanwhile are left in ``timed.bytes``. Raises
    :class:`LostInput` when no rerun started within :data:`NO_RERUN_S`."""
    prepare = getattr(act, "prepare", None)
    if prepare is not None:  # e.g. open a dropdown: no rerun yet, so not part of the time
        prepare()
    t0 = 0.0 if since_load else page.evaluate("performance.now()")
    start_bytes = RECEIVED[0]
    act()
    started = time.monotonic()
    while time.monotonic() < started + timeout_s:
        done = page.evaluate(DONE_JS, [t0, QUIET_MS])
        if done is not None:
            timed.bytes = RECEIVED[0] - start_bytes
            return (done - t0) / 1000.0
        if (
            not since_load
            and time.monotonic() - started > NO_RERUN_S
            and not page.evaluate(RAN_JS, t0)
        ):
            raise LostInput("the input started no rerun")
        time.sleep(0.05)
    states = page.evaluate("window.__iso.states")
    recent = [(s, round(t - t0)) for s, t in states if t >= t0 - 2000][-8:]
    raise TimeoutError(f"the app did not become idle (script states, ms from the input: {recent})")


def timed_change(page, acts: list[Callable[[], None]], i: int, timeout_s: float = ACTION_TIMEOUT_S):
    """:func:`timed` for ``acts[i]``, one of a control's alternating values.

    Now and then (2 of ~150 inputs in one full run here, always a widget inside an
    ``st.fragment``) the browser shows the new value but Streamlit starts no rerun, and the page
    then disagrees with the server. Such an input is counted in ``timed.retries``; the control's
    next value is set (untimed) so page and server agree again, and the input is timed anew."""
    try:
        return timed(page, acts[i % len(acts)], timeout_s)
    except LostInput:
        timed.retries += 1
        page.keyboard.press("Escape")
        timed(page, acts[(i + 1) % len(acts)], timeout_s)
        return timed(page, acts[i % len(acts)], timeout_s)


def timed_switch(page, title: str, timeout_s: float = ACTION_TIMEOUT_S) -> float:
    """:func:`timed` for a click on a navigation link. A click that started no rerun (seen about
    once in ten full runs) is clicked again and counted in ``timed.retries``."""
    try:
        return timed(page, nav(page, title), timeout_s)
    except LostInput:
        timed.retries += 1
        return timed(page, nav(page, title), timeout_s)


RAN_JS = "(t0) => window.__iso.states.some(([s, t]) => t >= t0 && s === 'running')"
timed.retries = 0
timed.bytes = 0


# ----------------------------------------------------------------------------- widget drivers


def container(page, key: str):
    return page.locator(f".st-key-{key.replace(' ', '-')}").first


def choose(page, key: str, option: str) -> Callable[[], None]:
    """A selectbox: click the option with this text. Opening the dropdown is the ``prepare`` step,
    outside the timed window: a person's change is the click on the option."""

    def item():  # visible options only: "3" must not match a closed dropdown's "(D=3)"
        return page.locator('[role="option"]:visible').filter(has_text=option).first

    def prepare() -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        box = container(page, key).locator('[role="combobox"]').first
        for _ in range(3):  # a click right after another widget's rerun can close it at once
            box.click()
            try:
                item().wait_for(timeout=3000)
                return
            except PlaywrightTimeout:
                continue
        item().wait_for()

    def act() -> None:
        item().click()

    act.prepare = prepare
    return act


def radio(page, key: str, option: str) -> Callable[[], None]:
    return lambda: container(page, key).locator("label").filter(has_text=option).first.click()


def slider_key(page, key: str, direction: str) -> Callable[[], None]:
    """A slider or select_slider: one arrow-key step on its (first) thumb's range input."""

    def act() -> None:
        thumb = container(page, key).locator('input[type="range"]').first
        thumb.focus()
        thumb.press(direction)

    return act


def tab(page, label: str) -> Callable[[], None]:
    return lambda: page.locator('[role="tab"]').filter(has_text=label).first.click()


def nav(page, title: str) -> Callable[[], None]:
    return lambda: (
        page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).first.click()
    )


# Per page: (action name, [forward act, backward act]) built from the page; the two acts are
# alternated so each timed run changes the control (neither may be the control's default value:
# choosing the current value reruns nothing).
def actions(page, stem: str) -> list[tuple[str, list[Callable[[], None]]]]:
    if stem == "outliers":
        return [
            ("colour by", [radio(page, "out_stat", "|mean|"), radio(page, "out_stat", "mean")]),
            (
                "hidden state",
                [
                    slider_key(page, "out_state", "ArrowRight"),
                    slider_key(page, "out_state", "ArrowLeft"),
                ],
            ),
            (
                "z-score threshold",
                [
                    slider_key(page, "out_thr_z", "ArrowRight"),
                    slider_key(page, "out_thr_z", "ArrowLeft"),
                ],
            ),
        ]
    if stem == "anisotropy":
        return [
            (
                "post-processing",
                [
                    choose(page, "aniso_post", "standardisation"),
                    choose(page, "aniso_post", "mean-centering"),
                ],
            ),
            (
                "hidden state",
                [
                    slider_key(page, "aniso_layer", "ArrowRight"),
                    slider_key(page, "aniso_layer", "ArrowLeft"),
                ],
            ),
            (
                "top dimensions",
                [
                    slider_key(page, "aniso_topk", "ArrowRight"),
                    slider_key(page, "aniso_topk", "ArrowLeft"),
                ],
            ),
        ]
    if stem == "projections":
        return [
            (
                "colour by",
                [
                    choose(page, "proj_colour_token sample", "token (most frequent)"),
                    choose(page, "proj_colour_token sample", "position in the text"),
                ],
            ),
            ("hidden state", [choose(page, "proj_state", "4"), choose(page, "proj_state", "5")]),
            (
                "post-processing",
                [
                    choose(page, "proj_post", "standardisation"),
                    choose(page, "proj_post", "clip outlier"),
                ],
            ),
        ]
    if stem == "similarity":
        return [
            (
                "also compare",
                [
                    choose(page, "sim_sts_post", "mean-centering"),
                    choose(page, "sim_sts_post", "standardisation"),
                ],
            ),
            (
                "sweep state",
                [
                    choose(page, "sim_wic_sweep_state", "3"),
                    choose(page, "sim_wic_sweep_state", "6"),
                ],
            ),
        ]
    if stem == "layernorm":
        return [
            ("k", [slider_key(page, "ln_k", "ArrowRight"), slider_key(page, "ln_k", "ArrowLeft")]),
            ("colour", [radio(page, "ln_scale", "value"), radio(page, "ln_scale", "z-score")]),
        ]
    if stem == "positional":
        return [
            (
                "positions shown",
                [
                    slider_key(page, "pos_emb_n", "ArrowLeft"),
                    slider_key(page, "pos_emb_n", "ArrowRight"),
                ],
            ),
            (
                "tab",
                [tab(page, "Position probe"), tab(page, "Position embeddings")],
            ),
        ]
    return []


def pages_from_app() -> list[tuple[str, str]]:
    import ast

    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "PAGES" for t in node.targets
        ):
            return [
                (Path(f).stem, title)
                for f, title, _ in ast.literal_eval(node.value)
                if (ROOT / "pages" / f).exists()
            ]
    raise RuntimeError("app.py has no PAGES list")


def summary(times: list[float], sizes: list[int] | None = None) -> dict:
    out = {
        "median_s": round(statistics.median(times), 3),
        "worst_s": round(max(times), 3),
        "runs_s": [round(t, 3) for t in times],
    }
    if sizes:
        out["median_bytes_received"] = int(statistics.median(sizes))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 = a free port")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", nargs="*", help="page file stems (default: all)")
    parser.add_argument("--log", default="/tmp/isoscope_latency_streamlit.log")
    parser.add_argument(
        "--no-warm-all",
        dest="warm_all",
        action="store_false",
        help="visit only the chosen pages before timing (default: every page)",
    )
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    port = args.port or free_port()
    proc = start_server(port, Path(args.log))
    all_pages = pages_from_app()
    chosen = [p for p in all_pages if not args.pages or p[0] in args.pages]
    out: dict = {
        "controls": {},
        "page_switch": {},
        "targets": TARGETS,
        "meta": {
            "repeats": args.repeats,
            "quiet_ms": QUIET_MS,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.add_init_script(INIT_SCRIPT)
            count_bytes(page)
            page.goto(f"http://127.0.0.1:{port}/", wait_until="domcontentloaded")
            first = time.perf_counter()
            timed(page, lambda: None, timeout_s=600, since_load=True)
            out["meta"]["first_load_s"] = round(time.perf_counter() - first, 1)
            # visit every page once (fills the caches), then time switches between them
            for _stem, title in (all_pages[1:] + all_pages[:1]) if args.warm_all else chosen:
                timed_switch(page, title, timeout_s=600)
            for stem, title in chosen:
                timed_switch(page, title, timeout_s=600)
                for name, acts in actions(page, stem):
                    label = f"{stem}: {name}"
                    try:
                        for i in range(len(acts)):  # warm every value once
                            timed_change(page, acts, i, timeout_s=600)
                        times, sizes = [], []
                        for i in range(args.repeats):
                            times.append(timed_change(page, acts, i))
                            sizes.append(timed.bytes)
                    except Exception as exc:  # a missing widget must not lose the other figures
                        out["controls"][label] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                        print(f"{label} failed: {exc}", file=sys.stderr)
                        page.keyboard.press("Escape")
                        continue
                    out["controls"][label] = summary(times, sizes)
                    print(f"{label} {summary(times, sizes)}", file=sys.stderr)
            for stem, title in chosen:
                times, sizes = [], []
                for _ in range(max(1, args.repeats // 2)):
                    other = next(t for s, t in all_pages if s != stem)
                    timed_switch(page, other)
                    times.append(timed_switch(page, title))
                    sizes.append(timed.bytes)
                out["page_switch"][stem] = summary(times, sizes)
                print(f"switch to {stem} {summary(times, sizes)}", file=sys.stderr)
            browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    controls = [v for v in out["controls"].values() if "error" not in v]
    switches = [v for v in out["page_switch"].values()]
    out["meta"]["inputs_redone"] = timed.retries
    out["met"] = {
        "control_median": all(v["median_s"] <= TARGETS["control_median_s"] for v in controls),
        "control_worst": all(v["worst_s"] <= TARGETS["control_worst_s"] for v in controls),
        "page_switch": all(v["worst_s"] <= TARGETS["page_switch_s"] for v in switches),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
