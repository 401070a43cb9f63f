"""``honesteval serve`` and ``honesteval server``: deployments and a local Prefect server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from honesteval._tempserver import remove_server_file, write_server_file
from honesteval.errors import ConfigError
from honesteval.project import load_project

DEFAULT_CRON = "0 3 * * *"

#: Server settings that keep every task run recorded under load (PREFECT-NOTES §5: with the
#: defaults a long-lived server dropped events above ~60 task runs/s). Triggers stay on, so
#: automations on ``honesteval.coverage.low`` work; batching keeps task-run rates low.
RECORDING_SETTINGS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE": "100",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_READ_BATCH_SIZE": "100",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}


def deployments_for(project: str | Path, cron: str = DEFAULT_CRON) -> list[Any]:
    """The four deployments, with the project bound as a parameter.

    ``evaluate/val``, ``evaluate/train``, ``gate/val`` (pass ``candidate``) and
    ``reevaluate-best/nightly`` (cron, UTC). Bad parameters (``split=test``, ``n_trials=0``)
    are refused by Prefect before a run is created: the flows' signatures are the schema.
    """
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron

    from honesteval.flows import evaluate, gate, reevaluate_best

    proj = load_project(project)  # a bad project fails here, before serving
    root = str(proj.root)
    try:
        nightly = Cron(cron, timezone="UTC")
    except Exception as exc:
        raise ConfigError(f"--cron {cron!r} is not a valid cron expression: {exc}") from None
    deployments = [
        evaluate.to_deployment(
            name="val",
            parameters={"project": root, "split": "val"},
            description="Evaluate a candidate on val",
        ),
        evaluate.to_deployment(
            name="train",
            parameters={"project": root, "split": "train"},
            description="Evaluate a candidate on train",
        ),
        gate.to_deployment(
            name="val",
            parameters={"project": root},
            description="Gate a candidate against the current best on val",
        ),
        reevaluate_best.to_deployment(
            name="nightly",
            parameters={"project": root},
            schedules=[nightly],
            description="Re-run the current best on val with fresh seeds; report drift",
        ),
    ]
    for deployment in deployments:
        assert isinstance(deployment, RunnerDeployment)  # to_deployment is sync here
        offer_candidates(deployment._parameter_openapi_schema.properties, proj.candidate_names())
    return deployments


def offer_candidates(properties: dict[str, Any], names: list[str]) -> None:
    """Make the ``candidate`` parameter a choice among the candidates found now (the form in
    the UI shows a list; Prefect refuses another name before a run exists). Serve again to
    offer candidates added later."""
    schema = properties.get("candidate")
    if schema is None or not names:
        return
    choice = {"type": "string", "enum": sorted(names)}
    if "anyOf" in schema:  # optional: the current best when left empty
        schema["anyOf"] = [choice, {"type": "null"}]
    else:
        schema.pop("type", None)
        schema.update(choice)


def serve(project: str | Path, *, cron: str = DEFAULT_CRON, limit: int | None = None) -> None:
    from prefect import serve as prefect_serve

    prefect_serve(*deployments_for(project, cron), limit=limit)


def server_env(project: str | Path | None, database_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RECORDING_SETTINGS)
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    elif project is not None:
        state = load_project(project).state_dir / "prefect"
        state.mkdir(parents=True, exist_ok=True)
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{state / 'prefect.db'}"
    return env


def _prefect_executable() -> str:
    beside = Path(sys.executable).parent / "prefect"
    return str(beside) if beside.exists() else "prefect"


def wait_healthy(
    api_url: str, timeout_s: float = 120.0, proc: subprocess.Popen[bytes] | None = None
) -> bool:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def run_server(
    project: str | Path | None, *, host: str, port: int, database_url: str | None, echo: Any = print
) -> int:
    """Run ``prefect server start`` in the foreground with the recording settings."""
    env = server_env(project, database_url)
    # The UI's own API address defaults to port 4200; point it at the port we serve on.
    env.setdefault("PREFECT_UI_API_URL", f"http://{host}:{port}/api")
    cmd = [_prefect_executable(), "server", "start", "--host", host, "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env)

    def stop(signum: int, _frame: Any) -> None:
        proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    api = f"http://{host}:{port}/api"
    announced = False
    if wait_healthy(api, proc=proc):
        echo(f"Prefect server ready. UI: http://{host}:{port}/  (new UI: /v2/)")
        echo(f"In other shells: export PREFECT_API_URL={api}")
        # honesteval commands with the same PREFECT_HOME find it without PREFECT_API_URL.
        local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        write_server_file(f"http://{local}:{port}/api", os.getpid())
        announced = True
    try:
        return proc.wait()
    finally:
        if announced:
            remove_server_file(os.getpid())
        if proc.poll() is None:
            proc.kill()


def free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalServer:
    """A throw-away ``honesteval server`` on a free loopback port (tests, bench, docs).

    ``env`` is the environment for clients (PREFECT_API_URL set); leaving the ``with`` block
    stops the server with SIGTERM and waits for its whole process group to be gone.
    """

    def __init__(
        self, prefect_home: Path, project: str | Path | None = None, log: Path | None = None
    ):
        self.port = free_port()
        self.ui_url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.ui_url}/api"
        base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        base.update(PREFECT_HOME=str(prefect_home), DO_NOT_TRACK="1")
        self.server_env = base
        self.env = {**base, "PREFECT_API_URL": self.api_url}
        args = [_honesteval_executable(), "server", "--port", str(self.port)]
        if project is not None:
            args += ["--project", str(project)]
        out = log.open("wb") if log is not None else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            args, env=base, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def __enter__(self) -> LocalServer:
        if not wait_healthy(self.api_url, proc=self.proc):
            self.stop()
            raise RuntimeError(f"the Prefect server on port {self.port} did not come up")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 30) -> None:
        stop_group(self.proc, signal.SIGTERM, timeout_s)


def stop_group(proc: subprocess.Popen[bytes], sig: int, timeout_s: float = 30) -> None:
    """Signal a process started with ``start_new_session`` and wait until its group is gone."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise RuntimeError(f"{proc.args!r} ignored signal {sig}; killed") from None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{proc.args!r} left processes behind")


def _honesteval_executable() -> str:
    beside = Path(sys.executable).parent / "honesteval"
    return str(beside) if beside.exists() else "honesteval"
