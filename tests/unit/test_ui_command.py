"""``honesteval ui`` opens the runs page of the server running for this PREFECT_HOME (a
``honesteval server`` or the reusable one) and prints its URL; with none running it says so in
one line. That the reusable server's page is the UI listing the sitting's runs, in chromium:
``tests/e2e/test_server_lifecycle.py``."""

from __future__ import annotations

import json
import os
import sys
import time
import webbrowser

import pytest

from honesteval.cli import main
from honesteval.server.localserver import SERVER_FILE, write_server_file


def run_ui(capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["ui"])
    out, err = capsys.readouterr()
    return int(exc.value.code), out, err


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    record = f"import sys, pathlib\npathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n"
    browser.write_text(f"#!{sys.executable}\n{record}")
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER", f"{browser} %s")
    # webbrowser reads BROWSER once per process, at its first use: this test's is read anew
    monkeypatch.setattr(webbrowser, "_tryorder", None)
    monkeypatch.setattr(webbrowser, "_browsers", {})
    return tmp_path / "home", opened


@pytest.mark.parametrize("kind", ["honesteval server", "reusable"])
def test_it_opens_the_announced_servers_runs_page_and_prints_it(home, capsys, kind):
    home_dir, opened = home
    write_server_file("http://127.0.0.1:4321/api", os.getpid())  # this process: it runs
    if kind == "reusable":
        path = home_dir / SERVER_FILE
        path.write_text(json.dumps({**json.loads(path.read_text()), "kind": "reusable"}))
    code, out, err = run_ui(capsys)
    assert code == 0, err
    assert out.splitlines()[0] == "http://127.0.0.1:4321/v2/runs"
    deadline = time.monotonic() + 30  # the browser runs apart: webbrowser does not wait for it
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.read_text() == "http://127.0.0.1:4321/v2/runs"


@pytest.mark.parametrize("kind", ["none", "gone"])
def test_without_a_server_it_says_how_to_start_one_in_one_line(home, capsys, kind):
    _, opened = home
    if kind == "gone":
        write_server_file("http://127.0.0.1:4321/api", 0)
    code, out, err = run_ui(capsys)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: no Prefect server runs for this PREFECT_HOME"), err
    assert "start one with `honesteval server`" in lines[0] and not opened.exists()
