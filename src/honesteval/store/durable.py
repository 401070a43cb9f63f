"""Writing state so that a full disk or a crash never leaves a wrong record.

``os.write`` may write fewer bytes than it was given (a nearly full disk writes what fits and
says how much; the next call raises ``ENOSPC``): every write here goes on until every byte is
written or the kernel refuses, and every file is fsynced before it counts. A failed write is
an :class:`OSError` naming the file, so the one line the user sees says where.

Two kinds of append, because their readers differ:

* :func:`write_fully` on an ``O_APPEND`` descriptor — a log that several processes append to
  at once (the trial logs: Dask workers). A failed write cannot be taken back (another
  writer's line may follow it), so the fragment stays; each line starts with a newline, so the
  next writer closes it and readers skip it (a trial whose line is torn is missing, reruns).
* :func:`append_owned` — a log with one writer at a time (the project lock): decisions.jsonl,
  drift_checks.jsonl, results/index.jsonl. A failed write is cut back to the length the file
  had, so nothing half-written stays; only a crash in the middle of the write can leave a torn
  tail, which the ledger's reader detects and its next append sets aside.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """fsync a folder, so a file created or renamed in it survives a power cut."""
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be fsynced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def named(exc: OSError, path: Path) -> OSError:
    """``exc`` with ``path`` as its file name (an ``os.write`` error names no file)."""
    if exc.filename is None:
        exc.filename = str(path)
    return exc


def write_fully(fd: int, data: bytes, path: Path) -> None:
    """Write every byte of ``data`` to ``fd``, however many calls it takes; a refusal (or a
    write that makes no progress) raises :class:`OSError` naming ``path``."""
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            if written <= 0:  # no progress and no error: treat it as the full disk it is
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[written:]
    except OSError as exc:
        raise named(exc, path) from None


def fsync(fd: int, path: Path) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        raise named(exc, path) from None


def append_owned(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Append ``data`` to ``path`` (one writer at a time) and fsync it; on any failure the
    file is cut back to its length before, then the error (naming the file) is raised."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, mode)
    except OSError as exc:
        raise named(exc, path) from None
    try:
        size = os.fstat(fd).st_size
        try:
            write_fully(fd, data, path)
            fsync(fd, path)
        except OSError:
            with contextlib.suppress(OSError):  # shrinking needs no space; if it fails anyway,
                os.ftruncate(fd, size)  # the reader sees a torn tail, never a record
                os.fsync(fd)
            raise
    finally:
        os.close(fd)
