"""A corrupt Prefect database is set aside, never left to block every command.

Prefect's SQLite database only mirrors what honesteval keeps under ``.honesteval/`` (trials,
results, the ledger): a truncated or scribbled ``prefect.db`` (a full disk, a copy cut short, a
stray write) makes Prefect's server die at boot with ``database disk image is malformed``, and
every command waits for a server that never answers. Before a server opens the database, it
is checked (SQLite's ``quick_check``, read only); a database that fails is renamed beside
itself with the time (``prefect.db.corrupt-20261203T101500Z``, its ``-wal`` and ``-shm`` files
with it), nothing deleted, and the server starts on a fresh one. The line that says so is left
in :data:`NOTICE_FILE` for the command that waits on the server to print once.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path

#: Where the server leaves the line about a database it set aside, for the CLI to print.
NOTICE_FILE = "honesteval-database-set-aside.txt"
#: SQLite's companions of a database file, renamed with it.
_COMPANIONS = ("-wal", "-shm", "-journal")


def damage(database: Path) -> str | None:
    """What is wrong with ``database`` (SQLite's words), or None when it reads fine or does
    not exist yet."""
    if not database.is_file() or database.stat().st_size == 0:
        return None  # Prefect makes a new one
    try:
        conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            return None  # a server is using it: not ours to judge
        return str(exc)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    verdict = "; ".join(str(r[0]) for r in rows[:3])
    return None if verdict == "ok" else verdict


def set_aside_if_corrupt(database: Path, *, leave_notice: bool = True) -> str | None:
    """Rename ``database`` (and its companions) aside when it is corrupt; the line that says
    so, or None when it is sound. ``leave_notice``: the line is also left in
    :data:`NOTICE_FILE` beside it, for the command waiting on the server to print."""
    why = damage(database)
    if why is None:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = database.with_name(f"{database.name}.corrupt-{stamp}")
    for suffix in ("", *_COMPANIONS):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{database}{suffix}", f"{aside}{suffix}")
    line = (
        f"the Prefect database {database} was corrupt ({why}): set aside as {aside.name}, "
        "a fresh one started; the runs' history in the UI starts again, the project's "
        ".honesteval/ (trials, results, the ledger) is untouched"
    )
    if leave_notice:
        with contextlib.suppress(OSError):
            database.with_name(NOTICE_FILE).write_text(line + "\n", encoding="utf-8")
    return line


def take_notice(home: Path) -> str | None:
    """The line a server left about a database it set aside, taken (renamed away first, so
    of several commands waiting on one server only one prints it)."""
    notice = home / NOTICE_FILE
    taken = notice.with_name(f"{NOTICE_FILE}.{os.getpid()}")
    try:
        os.replace(notice, taken)
    except OSError:
        return None
    try:
        return taken.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            taken.unlink()
