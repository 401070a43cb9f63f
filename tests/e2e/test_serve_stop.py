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


#: A flow run's process as serve starts it, reduced to what it does when its flow starts:
#: ``early`` has a Ctrl-C reach it while it is still in serve's process group (pending, as a
#: signal that arrives between its handlers and its leaving is).
_SERVED_RUN = """
import os, signal, sys
from honesteval import interrupts
from honesteval.orchestration.served_run import leave_serves_session
from honesteval.server.live_runs import served_runs

if sys.argv[1] == "early":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    os.kill(os.getpid(), signal.SIGINT)
try:
    with interrupts.stop_on_signals():
        leave_serves_session()
        print("left", os.getsid(0) == os.getpid(), flush=True)
        interrupts.sleep(60)
except KeyboardInterrupt:
    noted = list(served_runs(os.getppid()))
    print("asked", os.getsid(0) == os.getpid(), noted == [os.environ["PREFECT__FLOW_RUN_ID"]])
"""


@pytest.mark.parametrize("when", ["serve", "early"], ids=["asked-by-serve", "ctrl-c-first"])
def test_a_run_serve_started_leaves_its_session_and_notes_itself_unless_asked_already(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """The run leaves serve's process group (a terminal's Ctrl-C then reaches serve alone) and
    notes its pid for serve, which asks it once; one a Ctrl-C reached before it left is not
    noted (serve would ask it a second time, which stops a run at once)."""
    import os
    import uuid

    from honesteval.adapters import start_time
    from honesteval.server import live_runs

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    run_id = str(uuid.uuid4())
    env = {
        **os.environ,
        live_runs.SERVED_BY: str(os.getpid()),
        "PREFECT__FLOW_RUN_ID": run_id,
        "PREFECT_API_URL": "http://127.0.0.1:9/api",
    }
    run = subprocess.Popen(
        [sys.executable, "-c", _SERVED_RUN, when], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert run.stdout is not None
        line = run.stdout.readline().split()
        if when == "serve":
            assert line == ["left", "True"] and os.getpgid(run.pid) != os.getpgid(0)
            noted = live_runs.served_runs(os.getpid())
            assert noted == {run_id: (run.pid, start_time(run.pid))}
            assert live_runs.served_runs(os.getpid() + 1) == {}  # another serve's runs only
            os.killpg(run.pid, signal.SIGINT)  # what serve does, once
            line = run.stdout.readline().split()
        # out of serve's session either way; noted (until it exits) only if serve asked it
        assert line == ["asked", "True", str(when == "serve")]
        assert run.wait(30) == 0
    finally:
        run.kill()
    assert live_runs.served_runs(os.getpid()) == {}
    assert list((tmp_path / "honesteval-runs").glob("*.json")) == []  # dropped as it exited
