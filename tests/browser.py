"""Debian's chromium, headless, as the browser tests, the report bench and the screenshots
start it (one list of flags: no sandbox in containers, no GPU, nothing fetched in the
background)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile

HEADLESS_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
]

CHROMIUM = shutil.which("chromium")


def chromium(url: str, *flags: str, budget_ms: int = 0, timeout: float = 180) -> str:
    """What chromium prints for ``url`` with ``flags`` (``--dump-dom``: the DOM), after
    ``budget_ms`` of virtual time for scripts that fetch (e.g. the Prefect UI)."""
    assert CHROMIUM is not None, "Debian's chromium is missing: `make browser` installs it"
    profile = tempfile.mkdtemp(prefix="chromium-")
    budget = [f"--virtual-time-budget={budget_ms}"] if budget_ms else []
    flags_all = [*HEADLESS_FLAGS, "--disable-sync", "--hide-scrollbars", *budget, *flags]
    try:
        proc = subprocess.run(
            [CHROMIUM, *flags_all, f"--user-data-dir={profile}", url],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def runs_page_dom(ui_url: str) -> str:
    """The Prefect UI's runs list (v2) as chromium shows it, once its requests are answered."""
    return chromium(f"{ui_url}/v2/runs", "--window-size=1400,1000", "--dump-dom", budget_ms=20000)


def page_text(dom: str) -> list[str]:
    """The words a reader sees on a page, one text node an item, in page order."""
    texts = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return [html.unescape(t).strip() for t in re.split(r"<[^>]*>", texts) if t.strip()]
