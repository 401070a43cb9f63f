"""``honesteval serve`` stops on SIGINT or SIGTERM promptly once its Prefect server is gone
(Prefect alone retried pausing its schedules for about a minute, logging reconnect errors)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from honesteval.server.localserver import LocalServer, stop_group

#: Generous for 2 busy cores; what it replaces took ~50 s or more.
PROMPT_S = 25


def wait_for_deployments(api: str, proc: subprocess.Popen[bytes], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "serve exited before serving"
        try:
            found = httpx.post(f"{api}/deployments/filter", json={}, timeout=30).json()
        except httpx.HTTPError:  # a busy server: ask again
            found = []
        names = {d["name"] for d in found}
        if {"val", "nightly"} <= names:
            return
        time.sleep(1)
    raise AssertionError("serve never registered its deployments")


@pytest.mark.quick
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_exits_promptly_when_its_server_is_gone(
    make_project, tmp_path: Path, sig, seed_prefect_home
) -> None:
    root = make_project(["pass"])
    server = LocalServer(seed_prefect_home(tmp_path / "prefect-home"))  # not a first boot
    with server:
        serve = subprocess.Popen(
            [sys.executable, "-m", "honesteval.cli", "serve", "--project", str(root)],
            env=server.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            wait_for_deployments(server.api_url, serve)
        except BaseException:
            stop_group(serve, signal.SIGKILL, 10)
            raise
    # the server is stopped (the `with` block waited for its process group to be gone)
    sent = time.monotonic()
    serve.send_signal(sig)
    try:
        _, err = serve.communicate(timeout=PROMPT_S)
    except subprocess.TimeoutExpired:
        stop_group(serve, signal.SIGKILL, 10)
        raise AssertionError(f"serve still running {PROMPT_S} s after {sig.name}") from None
    took = time.monotonic() - sent
    assert serve.returncode == 0, err.decode()[-2000:]
    name = sig.name
    assert f"serve: {name}: the Prefect server at {server.api_url} does not answer" in err.decode()
    assert took < PROMPT_S
