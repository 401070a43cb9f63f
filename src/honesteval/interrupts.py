"""Stopping a run on Ctrl-C or SIGTERM: out in seconds, keeping what was paid for.

The first signal asks the run to stop (:func:`request_stop`): no new target starts, the
processes of command targets, ``isolate: true`` targets and shell steps get SIGTERM at once
(their trials are abandoned: not recorded, run again next time), and a python target or scorer
running in a thread gets :data:`GRACE_S` to finish (its rollout or grade is then recorded);
after that it is abandoned too (:func:`abandon_waits`). Rollouts already stored stay stored,
awaiting their score, and the next run grades them without running their targets again.
A second signal ends the process at once.

Plain Python, no Prefect: the task bodies, the target runners and the CLI all use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

#: How long a python target or scorer running in a thread may take to finish after a stop.
GRACE_S = 2.0
#: How long the end of an interrupted run may spend sending Prefect's queued events and log
#: lines to its server; what is left after that is dropped (the server is stopped next).
SEND_PENDING_S = 1.0


class TrialAbandoned(BaseException):
    """A trial's target or scorer was given up because the run is stopping: nothing is
    recorded for it (a ``BaseException``, so no ``except Exception`` turns it into a result)."""


class Stopped(Exception):
    """A command stopped by Ctrl-C or SIGTERM; its message is the one line the user sees."""


#: What a command stopped outside a run's trials says (whatever ran is on disk already).
STOPPED_LINE = "interrupted: every trial finished so far is kept; run the same command to resume"


class Interrupted(Stopped):
    """A run stopped by Ctrl-C or SIGTERM, with how many of its trials are kept on disk."""

    def __init__(self, kept: int, planned: int):
        self.kept, self.planned = kept, planned
        super().__init__(f"interrupted: {kept_line(kept, planned)}")


def kept_line(kept: int, planned: int) -> str:
    """What a stopped run says it kept: ``8 of 24 trials kept; run the same command to
    resume`` (an interruption's line, and a Dask run's left with no live worker)."""
    return f"{kept} of {planned} trials kept; run the same command to resume"


_stop = threading.Event()
_lock = threading.Lock()
#: process groups of running child processes (targets, steps): pgid -> None
_children: dict[int, None] = {}
#: target and scorer calls a trial thread is waiting for
_waits: dict[Future[Any], None] = {}
#: what wakes the code waiting for the run (the dispatch loop), while one is waiting
_wakers: list[Callable[[], None]] = []


#: One entry per :func:`reset`: a grace timer started before the last one does nothing.
_resets: list[None] = []
#: The storage error that stopped the run (a full disk, a read-only state folder), if any.
_failure: list[OSError] = []


def storage_failed(exc: OSError) -> None:
    """A trial could not be stored: stop the run as a Ctrl-C does (every later trial would
    fail the same way, each paid for and lost); the run then ends with this error."""
    if not _failure:
        _failure.append(exc)
    request_stop()


#: The name of the state a flow run stopped by a storage error ends in.
STORAGE_ERROR = "StorageError"


def storage_error_line(exc: OSError) -> str:
    """A storage error in one line: the file, then what went wrong."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def failure() -> OSError | None:
    """The storage error that stopped this run, or None."""
    return _failure[0] if _failure else None


def requested() -> bool:
    """Whether this process was asked to stop."""
    return _stop.is_set()


def sleep(seconds: float) -> bool:
    """Sleep up to ``seconds``; True if a stop cut it short."""
    return _stop.wait(seconds)


def reset() -> None:
    """Forget an earlier stop (tests, and a process that runs several commands)."""
    _stop.clear()
    _failure.clear()
    _resets.append(None)


def request_stop() -> None:
    """Stop starting work, SIGTERM every child process group, wake whoever waits for the run;
    :data:`GRACE_S` later, give up the calls still running (:func:`abandon_waits`)."""
    if _stop.is_set():
        return
    _stop.set()
    timer = threading.Timer(GRACE_S, _abandon_if_still_stopping, (len(_resets),))
    timer.daemon = True
    timer.start()
    with _lock:
        groups = list(_children)
        wakers = list(_wakers)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    for wake in wakers:
        wake()


def _abandon_if_still_stopping(resets: int) -> None:
    """:func:`abandon_waits`, unless the stop was forgotten meanwhile (:func:`reset`): the
    next run of this process (an optimiser loop's next gate after a full disk) keeps its
    calls."""
    if len(_resets) == resets and _stop.is_set():
        abandon_waits()


def abandon_waits() -> None:
    """Give up every target or scorer call a trial thread still waits for (:data:`GRACE_S`
    is over): the waiting trial gets :class:`TrialAbandoned`."""
    with _lock:
        waits = list(_waits)
    for future in waits:
        with contextlib.suppress(Exception):  # it finished meanwhile
            future.set_exception(TrialAbandoned())


@contextlib.contextmanager
def child_group(pgid: int) -> Iterator[None]:
    """Register a running child's process group, so a stop signals it; a child started after
    the stop gets SIGTERM at once."""
    with _lock:
        _children[pgid] = None
    if requested():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    try:
        yield
    finally:
        with _lock:
            _children.pop(pgid, None)


@contextlib.contextmanager
def waiting_for(future: Future[Any]) -> Iterator[None]:
    """Register a call a trial thread waits for, so :func:`abandon_waits` can give it up."""
    with _lock:
        _waits[future] = None
    try:
        yield
    finally:
        with _lock:
            _waits.pop(future, None)


@contextlib.contextmanager
def waking(wake: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a stop calls ``wake`` (from the signal handler: keep it short)."""
    with _lock:
        _wakers.append(wake)
    try:
        yield
    finally:
        with _lock:
            _wakers.remove(wake)


def kill_children_now() -> None:
    """SIGKILL every registered child process group (the process is about to end)."""
    with _lock:
        groups = list(_children)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _handle(signum: int, _frame: object) -> None:
    if requested():  # the second signal: out at once
        kill_children_now()
        with contextlib.suppress(Exception):
            os.write(2, b"\ninterrupted again: stopped at once\n")
        os._exit(130)
    request_stop()
    with _lock:
        graceful = bool(_wakers)
    if not graceful:  # nothing is waiting for trials: stop where the main thread is
        raise KeyboardInterrupt


#: One entry per :func:`stop_on_signals` block the main thread is in.
_handling: list[None] = []


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as described above while the block runs (main thread only;
    elsewhere this does nothing). Outside a run's dispatch, the first signal raises
    ``KeyboardInterrupt`` in the main thread, as Ctrl-C does by default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _handling:
        # The outermost block is a new command or run of this process (an optimiser loop,
        # `serve`, a test calling the CLI in-process): an earlier one's stop or full disk
        # must not abandon its trials.
        reset()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _handle)
    _handling.append(None)
    try:
        yield
    finally:
        _handling.pop()
        for sig, handler in previous.items():
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _pdeathsig() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes a child get SIGKILL when the thread that started it ends
    (Linux ``PR_SET_PDEATHSIG``): a SIGKILLed CLI leaves no target running. The libc function
    is looked up here, in the parent, so the forked child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigkill = 1, int(signal.SIGKILL)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, sigkill)

    return preexec


#: ``preexec_fn`` for every child honesteval starts for a user's program (None off Linux).
DIE_WITH_PARENT = _pdeathsig()
