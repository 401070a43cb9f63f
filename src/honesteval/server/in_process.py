"""Settings for flow runs that live and die inside the caller's process (CLI, demo, bench)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from uuid import UUID

from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from honesteval import interrupts
from honesteval.server.prefect_seams import (
    drain_event_and_log_workers,
    task_run_counter,
    task_run_state_markers,
)

_TERMINAL = ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]
#: How long the end of an in-process run may wait for the server to record its task runs.
RECORD_WAIT_S = 60.0

_tracked: list[UUID] | None = None
#: Whether in-process flow runs are noted on disk (a long-lived server: it outlives them).
_note_runs = False
_tracked_lock = threading.Lock()


def note_flow_run(flow_run_id: str) -> None:
    """Note a flow run this process runs in-process (see :mod:`honesteval.server.live_runs`),
    so a later command marks it ``Crashed`` if this process dies without ending it."""
    from prefect.settings import PREFECT_API_URL

    from honesteval.server.live_runs import note

    if _tracked is not None and _note_runs and PREFECT_API_URL.value():
        note(flow_run_id, str(PREFECT_API_URL.value()))


def track_task_run(task_run_id: UUID) -> None:
    """Note a task run created by an in-process flow, so the end of the run can wait for it."""
    with _tracked_lock:
        if _tracked is not None:
            _tracked.append(task_run_id)


class _TerminalFilter(logging.Filter):
    """What an in-process run keeps off the terminal (the API and the UI still get it all).

    The CLI prints its own result (coverage included; exit code 3 when it is low) and
    progress, so it drops the flows' own lines (running coverage, missing trials: the
    ``quiet_loggers``), and Prefect's lines about task runs a stop cancelled (the CLI says what
    was kept). Prefect's ERROR lines about task runs that ended in the ``quiet_states``
    (InfraError/ScorerError) are dropped everywhere (``honesteval.orchestration.tasks``).
    Lines below ``level`` are dropped from the terminal only (the Python API's default keeps
    Prefect's INFO lines, two a trial, for the server).
    """

    def __init__(
        self, state_names: Collection[str], loggers: Collection[str], level: int = logging.NOTSET
    ):
        super().__init__()
        self.markers = task_run_state_markers(state_names)
        self.loggers = frozenset(loggers)
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name in self.loggers or record.levelno < self.level:
            return False
        if record.name == "prefect.task_runs":
            message = record.getMessage()
            return not any(m in message for m in self.markers)
        return True


@contextmanager
def _quiet_terminal(
    state_names: Collection[str], loggers: Collection[str], level: int
) -> Iterator[None]:
    import prefect.main  # noqa: F401  (sets Prefect's logging up, console handler included)
    from prefect.logging.handlers import PrefectConsoleHandler

    console = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    # Cancelled: task runs a stop (Ctrl-C, SIGTERM) gave up; the CLI says what was kept.
    quiet = _TerminalFilter([*state_names, "Cancelled"], loggers, level)
    for handler in console:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in console:
            handler.removeFilter(quiet)


def wait_until_recorded(task_run_ids: list[UUID], timeout_s: float = RECORD_WAIT_S) -> bool:
    """Poll the API until every task run has a final state recorded (or ``timeout_s``).

    Task runs reach the server's database only as events, through its TaskRunRecorder; the
    client sends them in the background and does not wait. Why this matters: the temporary
    server of an in-process run is stopped (SIGTERM) when the process exits, and a recorder
    still writing the run's last events is cancelled mid-transaction. It then logs ``Error
    flushing … CancelledError`` tracebacks on the user's terminal, and those task runs never
    reach the database in ``PREFECT_HOME``. Waiting here makes the stop find an idle server.
    """
    if not task_run_ids:
        return True
    body = {
        "task_runs": {
            "id": {"any_": [str(i) for i in task_run_ids]},
            "state": {"type": {"any_": _TERMINAL}},
        }
    }
    deadline = time.monotonic() + timeout_s
    with task_run_counter() as count:
        while True:
            recorded = count(body)
            if recorded >= len(task_run_ids):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


#: Modules a flow run imports on first use (measured: ~0.5 s here, in the run's critical path):
#: the t quantile of every result, the engines, and what Prefect's client pulls in lazily.
_FIRST_USE_MODULES = (
    "scipy.special",
    "fastapi.encoders",
    "anyio._core._sockets",
    "prefect.flow_engine",
    "prefect.task_engine",
    "prefect.utilities.visualization",
)


@contextmanager
def imports_meanwhile() -> Iterator[None]:
    """Import what the first flow run will need on a side thread while the block runs (the
    CLI waiting ~4 s for a temporary server to boot, with nothing else to do), and wait for
    them at the end, so no import races the flow run. A module that is missing is left to the
    flow run, which says so itself."""

    def load() -> None:
        import importlib

        for name in _FIRST_USE_MODULES:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)

    thread = threading.Thread(target=load, daemon=True, name="honesteval-imports")
    thread.start()
    try:
        yield
    finally:
        thread.join()


def prefect_client_made_now() -> AbstractContextManager[object]:
    """Prefect's sync client for the flow runs of a block, made now, while the server boots;
    enter it once the server answers. Entering checks the server's version, as the first flow
    run's engine would, and while it is open every flow and task run in this context uses it
    (``prefect.context.SyncClientContext``, which Prefect's engines join through
    ``get_or_create``). A client made after the server answers was on the first command's
    critical path: it builds a TLS context from the CA bundle even for a loopback ``http``
    server (~0.08 CPU s here). Inside an open one (a nested block, a flow), that one serves."""
    from prefect.context import SyncClientContext

    if SyncClientContext.get() is not None:
        return contextlib.nullcontext()
    return SyncClientContext()


def send_pending(timeout_s: float = 5.0) -> None:
    """Send the events and log lines Prefect's client still holds, and wait (at most
    ``timeout_s`` each): what Prefect's exit handlers do, done while the server is still up.

    Both go out in the background (log lines every 2 s). A temporary server is stopped as soon
    as the run is recorded, so without this a run's last lines (its final progress line; all of
    them for a run shorter than 2 s) never reached its database: missing from the UI, and sent
    at exit to a server that was gone, which printed ``--- Error logging to API ---`` on the
    user's terminal. Events the same: with the server recording every 0.4 s the run is
    recorded sooner, and events still queued then went to a stopped server at exit
    (``EventsWorker - Still processing items: 15 items remaining...`` on the terminal, once in a
    full test run). A drained worker is replaced by a new one on its next use; a drain's own
    progress lines stay off the terminal (:mod:`~honesteval.server.prefect_seams`).
    """
    drain_event_and_log_workers(timeout_s)


@contextmanager
def in_process_runs(
    *,
    wait_for_recording: bool = True,
    quiet_states: Collection[str] = (),
    quiet_loggers: Collection[str] = (),
    terminal_level: int = logging.NOTSET,
) -> Iterator[None]:
    """Flow runs called in this process: no heartbeats, a quiet terminal, and a clean end.

    Heartbeats let a server notice that a *deployed* run's process died; a flow the CLI calls
    in its own process dies with the CLI, so they buy nothing here. They cost up to a second
    per flow run (the heartbeat thread sleeps in 1 s steps and is joined on exit), which on a
    2,000-trial evaluation is as much as all the rest of Prefect's overhead. Deployed runs
    (``honesteval serve``, workers) keep them.

    On a normal exit, sends the runs' last events and log lines (:func:`send_pending`) and waits
    until the server has recorded every task run the flows created here
    (:func:`wait_until_recorded`). Nested uses share the outermost one's wait.
    ``wait_for_recording=False`` skips that wait: a long-lived server goes on recording after
    this process exits (its events are sent before the exit either way), so only a
    temporary server, which the exit stops, needs it. ``quiet_states`` and ``quiet_loggers``
    say what the terminal is spared (:class:`_TerminalFilter`); the flows name theirs
    (:func:`honesteval.orchestration.flow_runs.quiet_in_process_runs`); so are log lines below
    ``terminal_level`` (they still go to the server).
    """
    global _tracked, _note_runs
    with _tracked_lock:
        outermost = _tracked is None
        if outermost:
            _tracked = []
            _note_runs = not wait_for_recording
    finished = False
    try:
        with (
            temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
            _quiet_terminal(quiet_states, quiet_loggers, terminal_level),
        ):
            yield
        if outermost and wait_for_recording and not interrupts.requested():
            send_pending()
            wait_until_recorded(list(_tracked or []))
            finished = True
    finally:
        if outermost:
            if not finished:  # stopped or failed: what is queued gets a moment, then is dropped
                send_pending(interrupts.SEND_PENDING_S / 2)
            from honesteval.server.live_runs import forget_mine

            forget_mine()
            with _tracked_lock:
                _tracked = None
