"""Benchmark: a class opening one server at once. Prints JSON to stdout.

    .venv/bin/python benchmarks/classroom.py [--sessions 30] [--modes cold,prewarm]
        [--clients protocol,chromium] [--repeats 1] [--port 8620]

For each mode a fresh server is started with ``isoscope serve`` on an empty result cache (bundled
model and corpus, UMAP warm-up off): ``cold`` with ``--prewarm off``; ``prewarm`` with the default
prewarm, the class arriving once it has finished (the teacher starts the server before class).
Then N sessions open the app at the same moment, and each, once its Overview is there, switches to
"Outlier dimensions" and then changes a control (the statistic radio). Two kinds of client:

- ``chromium``: N headless Chromium sessions (one browser, one context each: separate Streamlit
  sessions). A step's time runs from its input to the app being idle with every chart drawn
  (script state "notRunning", a title, no spinner, charts drawn). On one machine the N browsers
  share the server's cores, so this figure includes drawing N pages on those cores.
- ``protocol``: N websocket clients that speak Streamlit's own protocol (the BackMsg / ForwardMsg
  protobufs a browser sends and receives), with no rendering: a step's time runs from the request
  to the server's "script finished" message, after the page's last element. This is the server's
  share of what a student waits for when each student brings their own laptop.

Reported per mode: first page, page switch and control change (median, p95, max over sessions),
exceptions shown in any page, the number of extractions the server ran (its log's
:data:`isoscope.ui.work.extraction.EXTRACTION_LOG` lines: the page's, the first look's on a device with no recorded
speed, the prewarm's), and the server's peak RSS (sampled every 0.2 s, the server process and its
children). Targets (2 cores, N = 30): cold first page <= 30 s, prewarmed <= 10 s, page switch p95
<= 3 s, one extraction in all, 0 exceptions, peak RSS <= 3 GiB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.ui.widgets.charts import CHARTS_DRAWN_JS  # noqa: E402
from isoscope.ui.work.extraction import EXTRACTION_LOG  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
TARGETS = {
    "cold_first_page_max_s": 30.0,
    "prewarm_first_page_max_s": 10.0,
    "switch_p95_s": 3.0,
    "extractions": 1,
    "exceptions": 0,
    "peak_rss_gib": 3.0,
}


def _summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 2),
        "p95_s": round(p95, 2),
        "max_s": round(ordered[-1], 2),
    }


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        import psutil

        self.process = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stop.is_set():
            try:
                total = self.process.memory_info().rss
                for child in self.process.children(recursive=True):
                    try:
                        total += child.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                return
            time.sleep(0.2)


async def _idle(page, timeout_s: float, since: float) -> float:
    """Seconds from ``since`` until the app is idle with its charts drawn."""
    while True:
        state = await page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
        if state == "notRunning":
            charts, drawn = await page.evaluate(CHARTS_DRAWN_JS)
            titles = await page.locator("h1").count()
            spinners = await page.locator('[data-testid="stSpinner"]').count()
            if titles and not spinners and drawn >= charts:
                return time.perf_counter() - since
        if time.perf_counter() - since > timeout_s:
            raise TimeoutError(f"not idle after {timeout_s} s (script state {state})")
        await asyncio.sleep(0.1)


async def _exceptions(page) -> int:
    return await page.locator('[data-testid="stException"]').count()


async def one_session(browser, base: str, timeout_s: float, start: asyncio.Event) -> dict:
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await context.new_page()
    out: dict = {"exceptions": 0}
    try:
        await start.wait()
        t0 = time.perf_counter()
        await page.goto(base, timeout=timeout_s * 1000)
        out["first_page_s"] = await _idle(page, timeout_s, t0)
        out["exceptions"] += await _exceptions(page)
        await asyncio.sleep(0.5)  # the Overview's "idle" can precede a last rerun by a moment
        t1 = time.perf_counter()
        link = page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Outlier dimensions")
        await link.first.click(timeout=timeout_s * 1000)
        await page.wait_for_function(
            "() => document.querySelector('h1') && "
            "document.querySelector('h1').innerText.includes('Outlier')",
            timeout=timeout_s * 1000,
        )
        out["switch_s"] = await _idle(page, timeout_s, t1)
        out["exceptions"] += await _exceptions(page)
        t2 = time.perf_counter()
        radio = page.locator(".st-key-out_stat label").filter(has_text="|mean|").first
        await radio.click(timeout=timeout_s * 1000)
        await asyncio.sleep(0.3)  # let the rerun start before polling for idle
        out["control_s"] = await _idle(page, timeout_s, t2)
        out["exceptions"] += await _exceptions(page)
    except Exception as exc:  # a session that failed is reported, not fatal
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        await context.close()
    return out


async def _protocol_step(ws, timeout_s: float, page_hash: str = "", widgets=()) -> dict:
    """Send one rerun request and read the server's messages until the script has finished (a
    run cut short by a rerun is followed by the next one). Returns the time, the pages, the radio
    ids and the exceptions shown."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    request = BackMsg()
    request.rerun_script.query_string = ""
    request.rerun_script.page_script_hash = page_hash
    request.rerun_script.widget_states.widgets.extend(widgets)
    t0 = time.perf_counter()
    await ws.send(request.SerializeToString())
    out: dict = {"pages": {}, "radios": {}, "exceptions": 0}
    early = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_EARLY_FOR_RERUN")
    while True:
        remaining = timeout_s - (time.perf_counter() - t0)
        if remaining <= 0:
            raise TimeoutError(f"no script_finished after {timeout_s} s")
        message = ForwardMsg()
        message.ParseFromString(await asyncio.wait_for(ws.recv(), remaining))
        kind = message.WhichOneof("type")
        if kind == "navigation":
            out["pages"] = {p.page_name: p.page_script_hash for p in message.navigation.app_pages}
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            which = element.WhichOneof("type")
            if which == "exception":
                out["exceptions"] += 1
            elif which == "radio":
                out["radios"][element.radio.id] = list(element.radio.options)
        elif kind == "script_finished" and message.script_finished != early:
            out["s"] = time.perf_counter() - t0
            return out


async def one_protocol_session(base: str, timeout_s: float, start: asyncio.Event) -> dict:
    import websockets
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    url = base.replace("http://", "ws://") + "/_stcore/stream"
    out: dict = {"exceptions": 0}
    try:
        await start.wait()
        t0 = time.perf_counter()
        async with websockets.connect(url, subprotocols=["streamlit"], max_size=None) as ws:
            first = await _protocol_step(ws, timeout_s)
            out["first_page_s"] = time.perf_counter() - t0
            out["exceptions"] += first["exceptions"]
            switch = await _protocol_step(ws, timeout_s, first["pages"]["Outlier dimensions"])
            out["switch_s"] = switch["s"]
            out["exceptions"] += switch["exceptions"]
            radio = next(i for i in switch["radios"] if i.endswith("out_stat"))
            state = WidgetState(id=radio, string_value="|mean|")
            control = await _protocol_step(
                ws, timeout_s, first["pages"]["Outlier dimensions"], [state]
            )
            out["control_s"] = control["s"]
            out["exceptions"] += control["exceptions"]
    except Exception as exc:  # a session that failed is reported, not fatal
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return out


async def run_protocol_class(base: str, sessions: int, timeout_s: float) -> list[dict]:
    start = asyncio.Event()
    tasks = [
        asyncio.create_task(one_protocol_session(base, timeout_s, start)) for _ in range(sessions)
    ]
    await asyncio.sleep(0.2)
    start.set()
    return await asyncio.gather(*tasks)


async def run_class(base: str, sessions: int, timeout_s: float) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            start = asyncio.Event()
            tasks = [
                asyncio.create_task(one_session(browser, base, timeout_s, start))
                for _ in range(sessions)
            ]
            await asyncio.sleep(1.0)  # every context open before the class "arrives"
            start.set()
            return await asyncio.gather(*tasks)
        finally:
            await browser.close()


def one_mode(
    mode: str, client: str, sessions: int, port: int, timeout_s: float, workers: int | None
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        env = {
            **os.environ,
            "ISOSCOPE_CACHE_DIR": str(cache),
            "ISOSCOPE_UMAP_WARMUP": "0",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        log_path = Path(tmp) / "server.log"
        command = [sys.executable, "-m", "isoscope", "serve", "--port", str(port)]
        command += ["--prewarm", "off" if mode == "cold" else "default"]
        if workers:
            command += ["--workers", str(workers)]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        sampler = RssSampler(proc.pid)
        sampler.start()
        base = f"http://127.0.0.1:{port}"
        try:
            started = time.perf_counter()
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited: {log_path.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(0.2)
                if time.perf_counter() - started > timeout_s:
                    raise RuntimeError("server did not answer /_stcore/health")
            prewarm_s = None
            if mode == "prewarm":
                while "isoscope: prewarmed" not in log_path.read_text():
                    if time.perf_counter() - started > timeout_s:
                        raise RuntimeError("prewarm did not finish")
                    time.sleep(0.2)
                prewarm_s = round(time.perf_counter() - started, 1)
            run = run_protocol_class if client == "protocol" else run_class
            results = asyncio.run(run(base, sessions, timeout_s))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            sampler.stop.set()
            sampler.join(2)
        text = log_path.read_text()
    errors = [r["error"] for r in results if "error" in r]
    return {
        "mode": mode,
        "client": client,
        "sessions": sessions,
        "prewarm_ready_s": prewarm_s,
        "first_page": _summary([r["first_page_s"] for r in results if "first_page_s" in r]),
        "page_switch": _summary([r["switch_s"] for r in results if "switch_s" in r]),
        "control_change": _summary([r["control_s"] for r in results if "control_s" in r]),
        "exceptions": sum(r["exceptions"] for r in results),
        "failed_sessions": len(errors),
        "errors": sorted(set(errors))[:5],
        "server_extractions": text.count(EXTRACTION_LOG),
        "prewarmed": text.count("isoscope: prewarmed"),
        "peak_rss_gib": round(sampler.peak / 1024**3, 2),
    }


def _medians(runs: list[dict]) -> list[dict]:
    """Per client and mode over the repeats: the median of each run's figure and its range."""
    out = []
    for key in sorted({(r["client"], r["mode"]) for r in runs}):
        group = [r for r in runs if (r["client"], r["mode"]) == key]
        row: dict = {"client": key[0], "mode": key[1], "runs": len(group)}
        figures = {
            "first_page_median_s": ("first_page", "median_s"),
            "first_page_max_s": ("first_page", "max_s"),
            "switch_p95_s": ("page_switch", "p95_s"),
            "control_p95_s": ("control_change", "p95_s"),
        }
        for name, (step, stat) in figures.items():
            values = [r[step][stat] for r in group if stat in r[step]]
            if values:
                row[name] = {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
        for name in ("server_extractions", "exceptions", "failed_sessions", "peak_rss_gib"):
            values = [r[name] for r in group]
            row[name] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--modes", default="cold,prewarm")
    parser.add_argument("--clients", default="protocol,chromium", help="protocol and/or chromium")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each client and mode")
    parser.add_argument("--port", type=int, default=8620)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--workers", type=int, default=None, help="serve --workers")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    report = {"benchmark": "classroom", "cpus": os.cpu_count(), "targets": TARGETS, "runs": []}
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for client in clients:
        for mode in modes:
            for repeat in range(args.repeats):
                load = os.getloadavg()[0]
                run = one_mode(mode, client, args.sessions, args.port, args.timeout, args.workers)
                run["repeat"] = repeat + 1
                run["load_average_1min_before"] = round(load, 2)
                report["runs"].append(run)
                print(json.dumps(run), file=sys.stderr)
    report["medians"] = _medians(report["runs"])
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
