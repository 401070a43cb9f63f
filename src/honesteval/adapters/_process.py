"""Run one child process so that nothing it started outlives it.

Used by every place honesteval runs a user's program: the ``command`` target, shell steps, the
command judge (:func:`run_isolated`) and the ``isolate: true`` python target
(:func:`start_swept`). The child starts in its own session (so its process group holds everything
it forks) and carries a random tag in its environment (so a grandchild that left the group
with ``setsid`` is still found through ``/proc`` on Linux). When the child exits, times out or
the caller is interrupted, every process of the group or with the tag gets SIGTERM, then
SIGKILL after :data:`KILL_GRACE_S`. Output goes to files, never pipes: a detached grandchild
that keeps stdout open cannot stall the trial.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from honesteval import interrupts

#: Seconds between SIGTERM and SIGKILL for what is left of a child's processes.
KILL_GRACE_S = 2.0
#: The environment variable that marks every process a child started.
TAG_VAR = "HONESTEVAL_PROCESS_TAG"
_PROC = Path("/proc")
_POLL_S = 0.05


@dataclass(frozen=True)
class Finished:
    """How a child ended: ``returncode`` (negative: killed by that signal), or ``timed_out``."""

    returncode: int
    timed_out: bool
    seconds: float


def _stat_fields(pid: str | int) -> tuple[str, int, int] | None:
    """(state, process group, start time in clock ticks) of a pid from /proc, or None."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    after_comm = raw[raw.rfind(b")") + 2 :].split()  # comm may hold spaces and parentheses
    return after_comm[0].decode(), int(after_comm[2]), int(after_comm[19])


def start_time(pid: int) -> int:
    """When ``pid`` started (clock ticks since boot; 0 without /proc)."""
    fields = _stat_fields(pid) if _PROC.is_dir() else None
    return 0 if fields is None else fields[2]


def live_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None when it is gone or a zombie;
    0 where there is no /proc (then only whether it exists is known)."""
    if not _PROC.is_dir():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return fields[2]


def _has_tag(pid: str, marker: bytes) -> bool:
    try:
        return marker in (_PROC / pid / "environ").read_bytes()
    except OSError:
        return False


def remaining(pgid: int, tag: str, since: int = 0) -> list[int]:
    """Live (not zombie) processes in group ``pgid`` or carrying ``tag`` in their environment.

    Only processes started at or after ``since`` (the child's start time) can carry the tag,
    so only their environments are read.
    """
    if not _PROC.is_dir():  # no /proc: the group is all we can see
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    marker = f"{TAG_VAR}={tag}\0".encode()
    me = os.getpid()
    found = []
    for entry in os.listdir(_PROC):
        if not entry.isdigit() or int(entry) == me:
            continue
        fields = _stat_fields(entry)
        if fields is None or fields[0] in ("Z", "X"):
            continue
        if fields[1] == pgid or (fields[2] >= since and _has_tag(entry, marker)):
            found.append(int(entry))
    return found


def _signal_all(pgid: int, pids: list[int], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def terminate(pgid: int, tag: str, since: int = 0, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM everything left of a child, SIGKILL what survives ``grace_s`` seconds."""
    left = remaining(pgid, tag, since)
    if not left:
        return
    _signal_all(pgid, left, signal.SIGTERM)
    left = _wait_gone(pgid, tag, since, grace_s)
    if left:
        _signal_all(pgid, left, signal.SIGKILL)
        _wait_gone(pgid, tag, since, grace_s)  # SIGKILL is delivered asynchronously


def _wait_gone(pgid: int, tag: str, since: int, seconds: float) -> list[int]:
    """Poll until nothing is left or ``seconds`` pass; what is still there."""
    deadline = time.monotonic() + seconds
    left = remaining(pgid, tag, since)
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        left = remaining(pgid, tag, since)
    return left


@dataclass(frozen=True)
class SweptChild:
    """A child started by :func:`start_swept`; :meth:`sweep` ends everything it started."""

    proc: subprocess.Popen[bytes]
    tag: str
    since: int

    def sweep(self) -> None:
        """SIGTERM (then SIGKILL) the child's group and every process carrying its tag, the
        ones that left the group with ``setsid`` included; then reap the child."""
        terminate(self.proc.pid, self.tag, self.since)
        self.proc.wait()


def start_swept(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: IO[Any] | int | None,
    stdout: IO[Any] | int | None,
    stderr: IO[Any] | int | None,
    **popen: Any,
) -> SweptChild:
    """Start ``argv`` in its own session with a fresh tag in its environment, so that
    :meth:`SweptChild.sweep` finds all it started, and with a parent-death signal (Linux), so
    that a SIGKILLed CLI takes it along. Raises ``OSError`` when it cannot start."""
    tag = uuid.uuid4().hex
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**env, TAG_VAR: tag},
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=interrupts.DIE_WITH_PARENT,
        **popen,
    )
    return SweptChild(proc, tag, start_time(proc.pid))


def run_isolated(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdout: Path,
    stderr: Path,
    timeout_s: float,
    stdin: Path | None = None,
) -> Finished:
    """Run ``argv`` to completion or ``timeout_s``; nothing it started is left running.

    ``stdin`` is a file to read (``/dev/null`` when None); ``stdout``/``stderr`` are files
    written by the child. Raises ``OSError`` when the program cannot be started.
    """
    t0 = time.monotonic()
    with (
        open(stdin if stdin is not None else os.devnull, "rb") as fin,
        stdout.open("wb") as out,
        stderr.open("wb") as err,
    ):
        child = start_swept(argv, cwd=cwd, env=env, stdin=fin, stdout=out, stderr=err)
    timed_out = False
    with interrupts.child_group(child.proc.pid):  # Ctrl-C / SIGTERM of the CLI stops it at once
        try:
            try:
                child.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
        finally:
            child.sweep()
    if child.proc.returncode != 0 and interrupts.requested():
        raise interrupts.TrialAbandoned  # stopped by the stop, not a result
    return Finished(
        returncode=child.proc.returncode, timed_out=timed_out, seconds=time.monotonic() - t0
    )
