"""Flow runs the CLI runs in its own process against a long-lived server, noted on disk while
they run, so a run whose process died (SIGKILL, the OOM killer, a power cut) does not stay
``Running`` in the server forever: the next command that uses that server marks it
``Crashed``.

In-process runs have no heartbeats (they cost up to a second per run, see
:func:`honesteval.server.in_process.in_process_runs`), so the server cannot notice by itself.
A note is ``$PREFECT_HOME/honesteval-runs/<flow run id>.json``: the server's address, and the
pid and start time of the process running it. A flow run ``honesteval serve`` started notes
itself too, with serve's pid (:data:`SERVED_BY`): that is how serve finds the runs it asks to
stop. Plain standard library: importing this module imports neither Prefect nor httpx.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
from pathlib import Path

from honesteval.adapters import live_start_time, start_time
from honesteval.server.server_process import prefect_home

_FOLDER = "honesteval-runs"
#: The variable ``honesteval serve`` sets to its pid for the flow-run processes it starts: a
#: process whose parent it names was started by serve.
SERVED_BY = "HONESTEVAL_SERVE_PID"
_mine: list[Path] = []


def _folder() -> Path:
    return prefect_home() / _FOLDER


def note(flow_run_id: str, api_url: str, served_by: int | None = None) -> None:
    """Note that this process runs ``flow_run_id`` against the server at ``api_url`` (for the
    ``honesteval serve`` whose pid is ``served_by``, if one started it)."""
    folder = _folder()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{flow_run_id}.json"
        pid = os.getpid()
        info = {"api_url": api_url, "pid": pid, "start": start_time(pid)}
        path.write_text(json.dumps(info | ({} if served_by is None else {"served_by": served_by})))
        _mine.append(path)


def forget_mine() -> None:
    """This process's runs are over (or this process says so as it stops): drop its notes."""
    while _mine:
        with contextlib.suppress(OSError):
            _mine.pop().unlink()


def alive(pid: int, start: int) -> bool:
    """Whether the process that wrote a note still runs (the same pid, started then; a
    zombie has ended)."""
    return live_start_time(pid) == start


def served_runs(serve_pid: int) -> dict[str, tuple[int, int]]:
    """The flow runs noted for the ``honesteval serve`` whose pid is ``serve_pid`` whose
    process still runs: flow run id -> (pid, start time); each pid leads its process group."""
    found: dict[str, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for path in _folder().glob("*.json"):
            try:
                info = json.loads(path.read_text())
                pid, start = int(info["pid"]), int(info["start"])
                if info.get("served_by") == serve_pid and alive(pid, start):
                    found[path.stem] = (pid, start)
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return found


def crash_dead_runs(api_url: str) -> list[str]:
    """Mark ``Crashed`` every run noted for ``api_url`` whose process is gone, unless it
    already ended; drop those notes. The ids of the runs marked."""
    marked: list[str] = []
    try:
        notes = list(_folder().glob("*.json"))
    except OSError:
        return marked
    for path in notes:
        try:
            info = json.loads(path.read_text())
            if info["api_url"] != api_url or alive(int(info["pid"]), int(info["start"])):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _mark_crashed(api_url, path.stem):
            marked.append(path.stem)
        with contextlib.suppress(OSError):
            path.unlink()
    return marked


def _mark_crashed(api_url: str, flow_run_id: str) -> bool:
    """Set the run ``Crashed`` if it has not ended (the server keeps a final state)."""
    try:
        with urllib.request.urlopen(f"{api_url}/flow_runs/{flow_run_id}", timeout=5) as reply:
            state = json.loads(reply.read()).get("state") or {}
        if state.get("type") in ("COMPLETED", "FAILED", "CANCELLED", "CRASHED"):
            return False
        body = {
            "state": {
                "type": "CRASHED",
                "name": "Crashed",
                "message": "the process running this flow run died (found by a later "
                "honesteval command); its finished trials are stored",
            },
            "force": True,
        }
        request = urllib.request.Request(
            f"{api_url}/flow_runs/{flow_run_id}/set_state",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=5):
            return True
    except (OSError, ValueError):
        return False
