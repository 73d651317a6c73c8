"""Soak: many sequential analyses of distinct corpora, through one dashboard server and through the
CLI, sharing a bounded disk cache. Prints one JSON object with peak RSS and disk use per mode.

- ``server``: one real ``streamlit run app.py`` (port ``--port``) driven by headless Chromium
  through Playwright, one browser session: for each corpus, paste ``--lines + i`` distinct lines
  into the sidebar, press **Run analysis** and wait until the Overview page shows that many texts.
  A sampler thread reads the server's RSS (psutil, every 0.2 s) for the peak; the cache folder is
  measured after every analysis.
- ``cli``: the same corpora, one ``python -m isoscope analyze ... --cache-limit`` process each, on
  the same kind of cache folder; peak RSS per process (psutil, every 0.2 s) and disk use after each.

Both modes use a small random model (``random:bert``: 4 layers, width 256; no download, seconds per
analysis on 2 CPU cores) so 30 analyses fit in minutes; the cache limit is set low (default 200 MiB,
about 8 results) so eviction runs for most of the soak. The UMAP warm-up thread is off
(``ISOSCOPE_UMAP_WARMUP=0``): it compiles numba code for a minute and is not what is soaked here.
``ok`` is true when the cache never exceeded its limit after an analysis and the peak RSS stayed
under ``--rss-limit``.

Usage: ``python benchmarks/soak.py [--mode both|server|cli] [--analyses 30] [--lines 300]
[--cache-limit 200M] [--rss-limit 2G] [--port 8618]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from isoscope.engine.store.cache import ResultCache  # noqa: E402 (after the path insert)
from isoscope.engine.store.limit import format_size, parse_size  # noqa: E402 (after the path insert)

CHROMIUM = "/usr/bin/chromium"
MIB = 1024**2


def make_corpus(i: int, lines: int) -> str:
    """``lines`` distinct sentences, seeded by ``i``, from the bundled corpus's vocabulary."""
    from isoscope.engine.inputs.corpus import bundled_corpus

    words = sorted({w.strip(".,;:!?\"'()") for t in bundled_corpus().texts for w in t.split()})
    words = [w for w in words if w]
    rng = random.Random(i)
    return "\n".join(
        f"{i}.{n} " + " ".join(rng.choice(words) for _ in range(rng.randint(6, 18))) + "."
        for n in range(lines)
    )


def folder_bytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


class PeakRSS:
    """Polls the RSS of a process and its children every 0.2 s in a thread; ``.peak`` in bytes."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def now(self) -> int:
        import psutil

        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
            return sum(p.memory_info().rss for p in procs if p.is_running())
        except psutil.Error:
            return 0

    def _run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(0.2)

    def close(self) -> int:
        self.stop.set()
        self.thread.join(2)
        return self.peak


def base_env(cache_dir: Path, cache_limit: str) -> dict[str, str]:
    return {
        **os.environ,
        "ISOSCOPE_CACHE_DIR": str(cache_dir),
        "ISOSCOPE_CACHE_LIMIT": cache_limit,
        "ISOSCOPE_UMAP_WARMUP": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }


def summary(mode: str, rows: list[dict], limit: int, rss_limit: int, seconds: float) -> dict:
    disk = [r["disk_bytes"] for r in rows]
    rss = [r["rss_bytes"] for r in rows]
    peak_rss = max(r.get("peak_rss_bytes", r["rss_bytes"]) for r in rows)
    out = {
        "mode": mode,
        "analyses": len(rows),
        "seconds": round(seconds, 1),
        "cache_limit_bytes": limit,
        "peak_disk_bytes": max(disk),
        "final_disk_bytes": disk[-1],
        "peak_rss_bytes": peak_rss,
        "rss_limit_bytes": rss_limit,
        "peak_disk": format_size(max(disk)),
        "peak_rss": format_size(peak_rss),
        "rss_after": {str(n): format_size(rss[n - 1]) for n in (1, 10, 20, 30) if n <= len(rss)},
        "disk_after": {
            str(n): format_size(disk[n - 1]) for n in (1, 5, 10, 20, 30) if n <= len(disk)
        },
        "notices_nothing_cached": sum(r.get("nothing_cached", 0) for r in rows),
    }
    out["ok"] = bool(max(disk) <= limit and peak_rss <= rss_limit)
    return out


# ----------------------------------------------------------------------------- server


def _wait_health(base: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("streamlit did not start")


def _wait_idle(page, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < 3:
        if time.monotonic() > deadline:
            raise RuntimeError("the page did not finish")
        state = page.get_attribute('[data-testid="stApp"]', "data-test-script-state")
        busy = state != "notRunning" or page.locator('[data-testid="stSpinner"]').count() > 0
        quiet = 0 if busy else quiet + 1
        time.sleep(0.3)


def _texts_metric(page) -> str:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Texts").first
    return metric.locator('[data-testid="stMetricValue"]').inner_text().strip()


def run_server(args, corpora: list[str], work: Path) -> dict:
    from playwright.sync_api import sync_playwright

    cache_dir = work / "server-cache"
    env = base_env(cache_dir, args.cache_limit)
    log = (work / "streamlit.log").open("w")
    cmd = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.port", str(args.port), "--server.address", "127.0.0.1",
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{args.port}"
    rows: list[dict] = []
    started = time.perf_counter()
    try:
        _wait_health(base, proc)
        sampler = PeakRSS(proc.pid)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(base, wait_until="domcontentloaded", timeout=60_000)
            _wait_idle(page)  # first run: the default model on the bundled corpus
            sidebar = page.locator('[data-testid="stSidebar"]')
            custom = sidebar.get_by_label(
                "Custom model (used whenever it is filled in)", exact=True
            )
            custom.fill(args.model)
            custom.press("Enter")
            _wait_idle(page)
            sidebar.get_by_text("paste text").click()
            _wait_idle(page)
            for i, text in enumerate(corpora):
                t0 = time.perf_counter()
                area = sidebar.get_by_label("Texts (one per line)", exact=True)
                area.fill(text)
                area.press("Control+Enter")
                _wait_idle(page)
                sidebar.get_by_role("button", name="Run analysis").click()
                expected = f"{len(text.splitlines()):,}"
                deadline = time.monotonic() + 300
                while True:
                    _wait_idle(page)
                    try:
                        if _texts_metric(page) == expected:
                            break
                    except Exception:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"analysis {i}: the Overview never showed {expected}")
                    time.sleep(0.5)
                notices = page.get_by_text("nothing was cached").count()
                rows.append(
                    {
                        "i": i,
                        "seconds": round(time.perf_counter() - t0, 2),
                        "rss_bytes": sampler.now(),
                        "peak_rss_bytes": sampler.peak,
                        "disk_bytes": folder_bytes(cache_dir),
                        "nothing_cached": int(notices > 0),
                    }
                )
                print(
                    f"server {i + 1}/{len(corpora)}: rss {format_size(rows[-1]['rss_bytes'])}, "
                    f"disk {format_size(rows[-1]['disk_bytes'])}, {rows[-1]['seconds']} s",
                    file=sys.stderr,
                )
            browser.close()
        sampler.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    out = summary(
        "server",
        rows,
        parse_size(args.cache_limit),
        parse_size(args.rss_limit),
        time.perf_counter() - started,
    )
    out["cache_entries_final"] = (
        ResultCache(cache_dir, limit=args.cache_limit).usage().results_count
    )
    return out


# ----------------------------------------------------------------------------- cli


def run_cli(args, corpora: list[str], work: Path) -> dict:
    cache_dir = work / "cli-cache"
    env = base_env(cache_dir, args.cache_limit)
    env.pop("ISOSCOPE_CACHE_LIMIT")  # given as --cache-limit instead, as a user would
    rows: list[dict] = []
    started = time.perf_counter()
    for i, text in enumerate(corpora):
        texts = work / f"corpus{i}.txt"
        texts.write_text(text + "\n")
        t0 = time.perf_counter()
        cmd = [
            sys.executable, "-m", "isoscope", "analyze", "--model", args.model,
            "--texts", str(texts), "--out", str(work / f"out{i}.json"), "--device", "cpu",
            "--cache-limit", args.cache_limit,
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        sampler = PeakRSS(proc.pid)
        _, err = proc.communicate(timeout=600)
        peak = sampler.close()
        if proc.returncode != 0:
            raise RuntimeError(f"analyze {i} failed: {err[-2000:]}")
        rows.append(
            {
                "i": i,
                "seconds": round(time.perf_counter() - t0, 2),
                "rss_bytes": peak,
                "disk_bytes": folder_bytes(cache_dir),
                "nothing_cached": err.count("nothing was cached"),
            }
        )
        print(
            f"cli {i + 1}/{len(corpora)}: peak rss {format_size(peak)}, "
            f"disk {format_size(rows[-1]['disk_bytes'])}, {rows[-1]['seconds']} s",
            file=sys.stderr,
        )
    out = summary(
        "cli",
        rows,
        parse_size(args.cache_limit),
        parse_size(args.rss_limit),
        time.perf_counter() - started,
    )
    out["cache_entries_final"] = (
        ResultCache(cache_dir, limit=args.cache_limit).usage().results_count
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("both", "server", "cli"), default="both")
    parser.add_argument("--analyses", type=int, default=30)
    parser.add_argument("--lines", type=int, default=300, help="lines of corpus i: lines + i")
    parser.add_argument("--model", default="random:bert")
    parser.add_argument("--cache-limit", default="200M")
    parser.add_argument("--rss-limit", default="2G")
    parser.add_argument("--port", type=int, default=8618)
    args = parser.parse_args()
    corpora = [make_corpus(i, args.lines + i) for i in range(args.analyses)]
    report: dict = {
        "model": args.model,
        "analyses": args.analyses,
        "lines": f"{args.lines}..{args.lines + args.analyses - 1}",
        "cpu_count": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="isoscope-soak-") as tmp:
        work = Path(tmp)
        if args.mode in ("both", "server"):
            report["server"] = run_server(args, corpora, work)
        if args.mode in ("both", "cli"):
            report["cli"] = run_cli(args, corpora, work)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
