"""A local Prefect server's process as the commands see it: the Prefect home it lives in, the
file that announces a long-lived one, its health check, its command line and its
environment.

What :mod:`~honesteval.server.localserver` (which starts and stops servers) and
:mod:`~honesteval.server.sitting` (which finds or starts the sitting's reusable one) and
:mod:`~honesteval.server.live_runs` share, below all three, so none of them imports another
to get it. The standard library only: the CLI reads it before Prefect is imported.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path

#: The file in ``$PREFECT_HOME`` that announces a long-lived server (its API URL and pid).
SERVER_FILE = "honesteval-server.json"
#: The module a temporary or reusable server runs as (``python -m``).
SERVER_MODULE = "honesteval.server.localserver"


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def healthy(api_url: str, timeout_s: float = 1.0) -> bool:
    """True when ``api_url``/health answers 200 (plain urllib: no httpx import on the CLI path)."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout_s) as reply:
            return bool(reply.status == 200)
    except (OSError, ValueError):
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that was free a moment ago (the server binds it next)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(keep: int | None, extra: list[str]) -> tuple[list[str], str]:
    """The command line of a temporary or reusable server (``extra``: its own options) on a
    free port, and its API URL."""
    port = free_port()
    argv = [sys.executable, "-m", SERVER_MODULE, "--port", str(port)]
    argv += ["--keep-runs", "all" if keep is None else str(keep), *extra]
    return argv, f"http://127.0.0.1:{port}/api"


#: Server settings that keep every task run recorded under load (PREFECT-NOTES §5: with the
#: defaults a long-lived server dropped events above ~60 task runs/s). Triggers stay on, so
#: automations on ``honesteval.coverage.low`` work; batching keeps task-run rates low. Logs are
#: streamed out too (Prefect's default is off), so ``prefect deployment run --watch`` prints
#: the run's log lines, and ends with the last: the run's result.
RECORDING_SETTINGS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE": "100",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_READ_BATCH_SIZE": "100",
    "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "true",
    "PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}


#: The temporary server records in batches too, flushed every 0.4 s rather than every 5 s: the
#: CLI waits for the last batch before it stops the server. With Prefect's defaults, one insert
#: per event, a 200-trial run waited 1.7-3.0 s at its end for its task runs to be recorded.
#: Flushed every 1 s, 1.3 s; every 0.4 s, 0.05 s (3 alternating runs each, bench project of 50
#: tasks x 4 trials), the whole command 0.87x wall (5.77 vs 6.72 s), at +5% CPU; at 2,000
#: trials x 50 ms, 0.93x wall at +23% CPU (the server flushes more often). 0.2 s was no
#: faster than 0.4 s; with the triggers service on (every event evaluated for automations),
#: shorter flushes had slowed the run as much as they shortened the wait.
#: Prefect's task-run recorder truncates its interval to whole seconds (``int(0.4)`` is 0): it
#: flushes as soon as events arrive, and between them its loop never sleeps
#: (``asyncio.sleep(0)``), a core busy for the server's whole life. A temporary server lives
#: one command, and the figures above are that trade-off's.
TEMPORARY_RECORDING_SETTINGS = {
    **RECORDING_SETTINGS,
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "0.4",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "0.4",
}

#: The reusable server lives for a sitting, idle between commands and for minutes after the
#: last: its task-run recorder sleeps a whole second between flushes (nothing waits for its
#: last batch: the server outlives the command). With the temporary server's 0.4 s it kept a
#: core busy: 1.3 s of CPU in 8 idle seconds at a load of 23 (0.15 s for `honesteval
#: server`), +3 s of the server's CPU per 200-trial command (docs/performance.md).
REUSABLE_RECORDING_SETTINGS = {
    **TEMPORARY_RECORDING_SETTINGS,
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
}


#: The environment variables Prefect reads its triggers (automations) setting from.
TRIGGERS_SETTING = (
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED",
    "PREFECT_API_SERVICES_TRIGGERS_ENABLED",
)


def temporary_server_env(
    environ: Mapping[str, str], recording: Mapping[str, str] = TEMPORARY_RECORDING_SETTINGS
) -> dict[str, str]:
    """The environment of a temporary server, from the CLI's ``environ`` (a reusable server's
    too, with ``recording``: :data:`REUSABLE_RECORDING_SETTINGS`).

    What Prefect's own temporary server sets (no UI, the ephemeral service set), recording in
    batches, and no automations: the server is gone when the command ends, so an action it
    started could not finish, and its triggers and actions services cost ~0.35 s of every
    boot (4.02 → 3.68 s, median of 5 alternating boots) and CPU on every event during the
    run. The user's own triggers setting (either name in :data:`TRIGGERS_SETTING`) wins;
    automations run in full with ``honesteval server``.
    """
    # Prefect reads the current name first: ours would override a user's legacy one.
    defaults = {} if any(n in environ for n in TRIGGERS_SETTING) else {TRIGGERS_SETTING[0]: "false"}
    env = {
        **defaults,
        **environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        **recording,
    }
    env.pop("PREFECT_API_URL", None)
    return env


def server_env(database_url: str | None) -> dict[str, str]:
    """The environment of ``honesteval server``: the recording settings, and its database
    (``database_url``, else Prefect's default in ``PREFECT_HOME``: the one the sitting's
    reusable server records in, so the UI shows every run of the sitting)."""
    env = {**os.environ, **RECORDING_SETTINGS}
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    return env
