"""How big a 200-task × 5-candidate report is, how long it takes to build and to open.

Run from the checkout: ``.venv/bin/python bench/report_size.py``. Prints, in one process:

1. the state: 200 val tasks × 5 candidates × 3 trials written with store.py (no target runs);
2. ``write_report``: wall time (median of 3) and file size;
3. parsing the file with Python's ``html.parser`` (a floor for any reader);
4. headless Chromium (when ``chromium`` is installed): time from navigation start to the load
   event (``performance.timing``, over the DevTools protocol), median of 5, against a one-line
   HTML page loaded the same way in the same run (the baseline).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.synthetic_state

from tests.browser import HEADLESS_FLAGS
from tests.synthetic_state import synthetic_state

from honesteval.views.html import write_report

N_TASKS = 200
CANDIDATES = {"c0": 0.2, "c1": 0.4, "c2": 0.5, "c3": 0.6, "c4": 0.8}
OPENS = 5
LOAD_MS = (
    "performance.getEntriesByType('navigation')[0].loadEventEnd"
    " - performance.getEntriesByType('navigation')[0].startTime"
)


def _median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class _Chromium:
    """One headless Chromium driven over the DevTools protocol (websockets: a Prefect dep)."""

    def __init__(self) -> None:
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="chromium-bench-")
        self.proc = subprocess.Popen(
            [
                "chromium",
                *HEADLESS_FLAGS,
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        import httpx

        page = next(
            t for t in httpx.get(f"http://127.0.0.1:{port}/json").json() if t["type"] == "page"
        )
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None)
        self.next_id = 0
        self.call("Page.enable")

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                return msg.get("result", {})

    def load_ms(self, url: str) -> float:
        """Navigate, wait for the load event, return loadEventEnd − startTime (ms)."""
        self.call("Page.navigate", url=url)
        while json.loads(self.ws.recv()).get("method") != "Page.loadEventFired":
            pass
        time.sleep(0.05)  # loadEventEnd is set once the load handlers return
        value = self.call("Runtime.evaluate", expression=LOAD_MS, returnByValue=True)
        return float(value["result"]["value"])

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="honesteval-report-bench-"))
    t0 = time.perf_counter()
    root = synthetic_state(work, N_TASKS, CANDIDATES, output_chars=300)
    print(
        f"state: {N_TASKS} tasks × {len(CANDIDATES)} candidates × 3 trials written in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    path = root / ".honesteval" / "report.html"
    build_s = _median_s(lambda: write_report(root), 3)
    size = path.stat().st_size
    text = path.read_text(encoding="utf-8")
    parse_s = _median_s(lambda: HTMLParser().feed(text), 3)
    print(f"write_report: {build_s:.2f} s (median of 3); size {size / 1e6:.2f} MB")
    print(f"html.parser: {parse_s * 1000:.0f} ms")
    if shutil.which("chromium") is None:
        print("chromium not installed: no browser timing (apt-get install chromium)")
        return
    blank = work / "blank.html"
    blank.write_text("<!DOCTYPE html><title>x</title><p>x</p>\n")
    browser = _Chromium()
    try:
        browser.load_ms(path.as_uri())  # warm-up: fonts, caches
        report_ms = statistics.median(browser.load_ms(path.as_uri()) for _ in range(OPENS))
        blank_ms = statistics.median(browser.load_ms(blank.as_uri()) for _ in range(OPENS))
    finally:
        browser.close()
    print(
        f"chromium load event: report {report_ms:.0f} ms, one-line page {blank_ms:.0f} ms "
        f"(median of {OPENS}; ratio {report_ms / max(blank_ms, 1e-9):.1f}×)"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
