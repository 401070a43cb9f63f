"""Keep the Prefect home of the CLI's temporary server bounded (issue 15).

Every ``honesteval evaluate`` without a long-lived server records a flow run, its task runs,
their states, 3 events per task run, logs, artifacts and a result file in ``$PREFECT_HOME``;
nothing removes them (measured: +0.47 MB per 10-trial run, linear; 277 MB after ~200 bigger
runs). Prefect's own flow-run vacuum (``PREFECT_SERVER_SERVICES_DB_VACUUM_ENABLED=flow_runs``)
does not run in a temporary server, needs a retention of more than an hour, and would delete
flow runs that are not honesteval's; its event vacuum (``PREFECT_SERVER_EVENTS_RETENTION_PERIOD``,
7 days) does run, but is bounded by time, not by the number of runs.

So the temporary server, before it serves (it has written nothing yet), and the reusable
server of a sitting also every 30 s while commands use it, keep the newest
``HONESTEVAL_PREFECT_KEEP_RUNS`` flow runs tagged ``honesteval`` (default 50; ``all``: keep
everything) and deletes the older *finished* ones with all that hangs off them: subflow runs,
task runs, states, inputs, logs, artifacts (artifact collections re-pointed to the newest
artifact left), the events that name them, and their result files in
``$PREFECT_HOME/storage``. Runs without the ``honesteval`` tag, and unfinished runs, are never
touched. A database someone configured (``PREFECT_API_DATABASE_CONNECTION_URL``, or a profile
naming another one) is never touched: only the default ``$PREFECT_HOME/prefect.db``.

Freed pages are reused by later runs, so the file plateaus; when more than half of it is free
(after a first prune of a big old home) it is compacted with ``VACUUM``.

Plain ``sqlite3`` on Prefect's tables (stable since Prefect 2); a schema it does not know is
left alone with one line in the server's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
from pathlib import Path

from honesteval.errors import ConfigError

KEEP_RUNS_VAR = "HONESTEVAL_PREFECT_KEEP_RUNS"
DEFAULT_KEEP_RUNS = 50
_TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
#: A prune waits this long for a lock held by another server on the same database.
_BUSY_TIMEOUT_S = 5.0


def keep_runs_setting() -> int | None:
    """How many honesteval flow runs the temporary server's database keeps (None: all)."""
    raw = os.environ.get(KEEP_RUNS_VAR, "").strip()
    if not raw:
        return DEFAULT_KEEP_RUNS
    if raw.lower() == "all":
        return None
    try:
        keep = int(raw)
    except ValueError:
        keep = -1
    if keep < 0:
        raise ConfigError(f"{KEEP_RUNS_VAR} must be a whole number >= 0 or 'all', got {raw!r}")
    return keep


def default_database(home: Path) -> Path | None:
    """``$PREFECT_HOME/prefect.db`` when it is the database Prefect's settings name (the
    server process's; imports Prefect), else None: a database someone configured."""
    from prefect.settings import get_current_settings

    secret = get_current_settings().server.database.connection_url
    url = secret.get_secret_value() if secret is not None else ""
    default = home / "prefect.db"
    prefix = "sqlite+aiosqlite:///"
    if url.startswith(prefix) and Path(url[len(prefix) :]).resolve() == default.resolve():
        return default
    return None


def prune(database: Path, keep: int, *, compact: bool = True) -> int:
    """Delete the finished honesteval flow runs older than the newest ``keep`` from
    ``database`` (see the module docstring); the number of top-level runs deleted.
    ``compact`` False (a server is using the database): no ``VACUUM``, no checkpoint, which
    would hold up the server's own writes; SQLite reuses the freed pages all the same."""
    if not database.is_file():
        return 0
    conn = sqlite3.connect(database, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")  # states, task runs, inputs cascade
        conn.execute("BEGIN IMMEDIATE")
        try:
            old = _old_runs(conn, keep)
            runs = _with_subflows(conn, old)
            result_files = _result_files(conn, runs, database.parent / "storage")
            _delete(conn, runs)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        for path in result_files:  # after the commit: a file never outlives its reference
            with contextlib.suppress(OSError):
                path.unlink()
        if compact:
            _compact(conn)
        return len(old)
    finally:
        conn.close()


def _old_runs(conn: sqlite3.Connection, keep: int) -> list[str]:
    rows = conn.execute(
        "SELECT id, state_type FROM flow_run"
        " WHERE parent_task_run_id IS NULL"
        " AND EXISTS (SELECT 1 FROM json_each(flow_run.tags) WHERE value = 'honesteval')"
        " ORDER BY created DESC LIMIT -1 OFFSET ?",
        (keep,),
    ).fetchall()
    return [run_id for run_id, state in rows if state in _TERMINAL]


def _with_subflows(conn: sqlite3.Connection, runs: list[str]) -> list[str]:
    """``runs`` and, recursively, the flow runs started from their task runs."""
    found, frontier = list(runs), list(runs)
    while frontier:
        frontier = [
            row[0]
            for row in conn.execute(
                "SELECT f.id FROM flow_run f JOIN task_run t ON f.parent_task_run_id = t.id"
                f" WHERE t.flow_run_id IN ({_marks(frontier)})",
                frontier,
            )
        ]
        found += frontier
    return found


def _result_files(conn: sqlite3.Connection, runs: list[str], storage: Path) -> list[Path]:
    """The persisted results of ``runs`` that live in ``storage`` (result artifacts hold
    their ``storage_key``): only files right in the home's ``storage/``, the default result
    storage; a result storage someone configured is left alone."""
    files = []
    root = storage.resolve()
    for (data,) in conn.execute(
        f"SELECT data FROM artifact WHERE flow_run_id IN ({_marks(runs)}) AND key IS NULL",
        runs,
    ):
        with contextlib.suppress(ValueError, TypeError, KeyError):
            path = Path(json.loads(data)["storage_key"]).resolve()
            if path.parent == root:
                files.append(path)
    return files


def _delete(conn: sqlite3.Connection, runs: list[str]) -> None:
    if not runs:
        return
    marks = _marks(runs)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS pruned_event (id CHAR(36) PRIMARY KEY)")
    conn.execute("DELETE FROM pruned_event")
    conn.execute(
        "INSERT OR IGNORE INTO pruned_event SELECT event_id FROM event_resources"
        f" WHERE resource_id IN ({marks})",
        [f"prefect.flow-run.{run}" for run in runs],
    )
    conn.execute("DELETE FROM event_resources WHERE event_id IN (SELECT id FROM pruned_event)")
    conn.execute("DELETE FROM events WHERE id IN (SELECT id FROM pruned_event)")
    conn.execute(f"DELETE FROM flow_run WHERE id IN ({marks})", runs)
    conn.execute(f"DELETE FROM log WHERE flow_run_id IN ({marks})", runs)
    conn.execute(f"DELETE FROM artifact WHERE flow_run_id IN ({marks})", runs)
    # A collection whose latest artifact is gone shows the newest one left, or goes.
    conn.execute(
        "UPDATE artifact_collection SET (latest_id, task_run_id, flow_run_id, type, data,"
        " description, metadata_) = (SELECT a.id, a.task_run_id, a.flow_run_id, a.type, a.data,"
        " a.description, a.metadata_ FROM artifact a WHERE a.key = artifact_collection.key"
        " ORDER BY a.created DESC LIMIT 1)"
        " WHERE latest_id NOT IN (SELECT id FROM artifact)"
        " AND EXISTS (SELECT 1 FROM artifact a WHERE a.key = artifact_collection.key)"
    )
    conn.execute("DELETE FROM artifact_collection WHERE latest_id NOT IN (SELECT id FROM artifact)")


def _compact(conn: sqlite3.Connection) -> None:
    """VACUUM when more than half the file is free pages (a first prune of a big home);
    otherwise later runs reuse the free pages and the file stays as it is."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    with contextlib.suppress(sqlite3.OperationalError):  # busy: another server; next time
        if pages and free * 2 > pages:
            conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _marks(values: list[str]) -> str:
    return ",".join("?" * len(values))


def prune_temporary_home(database: Path | None, keep: int | None, *, live: bool = False) -> None:
    """What the temporary server runs before it serves (and the reusable one, ``live``, also
    while it serves: :func:`honesteval.server.sitting.tend`): prune its home's default
    database (``database``, from :func:`default_database`; None: it uses another one); any
    error is one line in its log, never a failed start."""
    if keep is None or database is None:
        return
    try:
        deleted = prune(database, keep, compact=not live)
    except sqlite3.Error as exc:
        print(f"honesteval: left the Prefect database as it is ({exc})", file=sys.stderr)
        return
    if deleted:
        print(f"honesteval: pruned {deleted} old flow runs (keeping {keep})", file=sys.stderr)
