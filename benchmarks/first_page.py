"""Benchmark: seconds from a cold ``streamlit run app.py`` to the Overview drawn in headless Chromium.

Each run starts a fresh server (new process, empty isoscope result cache, so the first page loads
the default model and extracts the bundled corpus) with the UMAP warm-up at its default (on), opens
the app in Playwright-driven Chromium (/usr/bin/chromium, launched before the clock starts, as a
user's browser would already be open) and stops the clock when the script run has finished, a
title is shown and every Plotly chart has drawn. Prints JSON: per run the seconds to the server's
health answer and to the drawn Overview, their median and spread, and the load average.

    .venv/bin/python benchmarks/first_page.py [--runs 3] [--port 8612] [--no-warmup]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.ui.widgets.charts import CHARTS_DRAWN_JS  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _drawn(page) -> bool:
    state = page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
    charts, drawn = page.evaluate(CHARTS_DRAWN_JS)
    return (
        state == "notRunning"
        and page.locator("h1").count() > 0
        and page.locator('[data-testid="stSpinner"]').count() == 0
        and charts > 0
        and drawn >= charts
    )


def one_run(browser, port: int, warmup: bool, timeout_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "ISOSCOPE_CACHE_DIR": str(Path(tmp) / "cache"),
            "ISOSCOPE_UMAP_WARMUP": "1" if warmup else "0",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        log = open(Path(tmp) / "streamlit.log", "w")  # noqa: SIM115 (closed in finally)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
            + ["--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            base = f"http://127.0.0.1:{port}"
            while True:
                if proc.poll() is not None or time.perf_counter() - started > timeout_s:
                    raise RuntimeError("streamlit did not come up")
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(0.1)
            health = time.perf_counter() - started
            page.goto(base)
            page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_s * 1000)
            while not _drawn(page):
                if time.perf_counter() - started > timeout_s:
                    return {
                        "server_health_s": round(health, 2),
                        "overview_drawn_s": None,
                        "timed_out_s": timeout_s,
                        "script_state": page.get_attribute(
                            '[data-testid="stApp"]', "data-test-script-state"
                        ),
                        "charts": page.evaluate(CHARTS_DRAWN_JS)[0],
                        "titles": page.locator("h1").count(),
                    }
                time.sleep(0.1)
            drawn = time.perf_counter() - started
            return {"server_health_s": round(health, 2), "overview_drawn_s": round(drawn, 2)}
        finally:
            page.close()
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=8612)
    parser.add_argument("--no-warmup", action="store_true", help="ISOSCOPE_UMAP_WARMUP=0")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    load_start = os.getloadavg()[0]
    runs = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for _ in range(args.runs):
                runs.append(one_run(browser, args.port, not args.no_warmup, args.timeout))
                print(json.dumps(runs[-1]), file=sys.stderr)
        finally:
            browser.close()
    drawn = [r["overview_drawn_s"] for r in runs if r["overview_drawn_s"] is not None] or [0.0]
    print(
        json.dumps(
            {
                "benchmark": "first_page",
                "cpus": os.cpu_count(),
                "umap_warmup": not args.no_warmup,
                "runs": runs,
                "overview_drawn_median_s": round(statistics.median(drawn), 2),
                "overview_drawn_spread_s": [min(drawn), max(drawn)],
                "load_average_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
