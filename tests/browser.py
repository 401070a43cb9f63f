"""Debian's chromium, headless, as the browser tests, the report bench and the screenshots
start it (one list of flags: no sandbox in containers, no GPU, nothing fetched in the
background)."""

from __future__ import annotations

HEADLESS_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
]
