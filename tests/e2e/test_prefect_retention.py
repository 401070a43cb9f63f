"""The Prefect home of the CLI's temporary server stays bounded: the newest
HONESTEVAL_PREFECT_KEEP_RUNS honesteval flow runs are kept, older finished ones go with
everything that hangs off them; nothing else is touched."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from honesteval.errors import ConfigError
from honesteval.server.retention import DEFAULT_KEEP_RUNS, KEEP_RUNS_VAR, keep_runs_setting
from tests.helpers import run_cli


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", DEFAULT_KEEP_RUNS), ("all", None), ("ALL", None), ("0", 0), (" 7 ", 7)],
)
def test_keep_runs_setting_reads_the_environment(monkeypatch, raw, expected):
    monkeypatch.setenv(KEEP_RUNS_VAR, raw)
    assert keep_runs_setting() == expected


@pytest.mark.parametrize("raw", ["-1", "ten", "2.5"])
def test_a_bad_keep_runs_setting_is_a_config_error(monkeypatch, raw):
    monkeypatch.setenv(KEEP_RUNS_VAR, raw)
    with pytest.raises(ConfigError, match=KEEP_RUNS_VAR):
        keep_runs_setting()


def _env(home: Path, keep: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), **{KEEP_RUNS_VAR: keep})
    return env


def test_a_bad_keep_runs_setting_stops_the_cli_with_one_line(make_project, tmp_path):
    root = make_project(["pass"])
    args = ["evaluate", "--project", str(root), "--candidate", "base"]
    proc = run_cli(*args, env=_env(tmp_path / "prefect", "lots"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {KEEP_RUNS_VAR} must be a whole number >= 0 or 'all', got 'lots'"
    ]


def test_only_the_default_database_of_the_home_is_pruned(tmp_path):
    probe = (
        "import sys\nfrom pathlib import Path\n"
        "from honesteval.server.retention import default_database\n"
        "print(default_database(Path(sys.argv[1])))\n"
    )
    home = tmp_path / "home"

    def chosen(**extra: str) -> str:
        env = {**_env(home, ""), **extra}
        env.pop("PREFECT_API_DATABASE_CONNECTION_URL", None)
        env.update(extra)
        out = subprocess.run(
            [sys.executable, "-c", probe, str(home)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert chosen() == str(home / "prefect.db")
    other = f"sqlite+aiosqlite:///{tmp_path / 'mine.db'}"
    assert chosen(PREFECT_API_DATABASE_CONNECTION_URL=other) == "None"


# -- a real temporary server ---------------------------------------------------------------


def _rows(db: Path, sql: str, *params: object) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def _honesteval_runs(db: Path) -> list[str]:
    return [
        r[0]
        for r in _rows(
            db,
            "SELECT id FROM flow_run WHERE tags LIKE '%\"honesteval\"%' ORDER BY created",
        )
    ]


def _copy_run(db: Path, source: str, **changes: object) -> str:
    """A new flow run row like ``source`` with ``changes`` (a run honesteval did not make,
    or one still running); its id."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = dict(conn.execute("SELECT * FROM flow_run WHERE id = ?", (source,)).fetchone())
        row.update(id=str(uuid.uuid4()), name=f"copy-{uuid.uuid4().hex[:8]}")
        row.update(state_id=None, idempotency_key=None)
        row.update(changes)
        cols = ", ".join(row)
        conn.execute(
            f"INSERT INTO flow_run ({cols}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
    return str(row["id"])


def _referenced_runs(db: Path) -> set[str]:
    """Every flow run id that task runs, logs, artifacts or events still point at."""
    ids = set()
    for table in ("task_run", "log", "artifact", "flow_run_state"):
        ids |= {r[0] for r in _rows(db, f"SELECT DISTINCT flow_run_id FROM {table}") if r[0]}
    prefix = "prefect.flow-run."
    for (resource,) in _rows(db, "SELECT DISTINCT resource_id FROM event_resources"):
        if resource.startswith(prefix):
            ids.add(resource[len(prefix) :])
    return ids


def _result_files(db: Path) -> set[str]:
    keys = set()
    for (data,) in _rows(db, "SELECT data FROM artifact WHERE key IS NULL"):
        keys.add(Path(json.loads(data)["storage_key"]).name)
    return keys


def _checkpointed_size(db: Path) -> int:
    """The database file's size with its write-ahead log folded in (no server is running)."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.stat().st_size


@pytest.mark.quick
@pytest.mark.slow
def test_the_temporary_servers_home_keeps_the_newest_runs_and_nothing_of_the_others(
    make_project, tmp_path, seed_prefect_home
):
    # keep 1: full from the second run on (the newest run before each, plus its own); two more
    # runs then show each run pruning one and the file not growing by a run's worth.
    keep = 1
    root = make_project(["pass", "fail", "graded"], config={"trials": 2})
    home = seed_prefect_home(tmp_path / "prefect")  # the pruning, not a first boot
    db = home / "prefect.db"
    env = _env(home, str(keep))
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--fresh", "--json"]

    made: list[str] = []  # honesteval's runs, oldest first
    sizes: dict[int, int] = {}
    foreign = running = ""
    for run in range(1, 5):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 0, proc.stderr
        new = [r for r in _honesteval_runs(db) if r not in made and r != running]
        assert len(new) == 1
        made += new
        if run == 1:
            # Older than everything that follows, and never to be pruned: a run without the
            # honesteval tag, and a honesteval run that has not finished.
            foreign = _copy_run(db, made[0], tags="[]")
            running = _copy_run(db, made[0], state_type="RUNNING", state_name="Running")
        # Pruned at the start of each run: the newest `keep` before it, plus its own.
        kept = made[-(keep + 1) :]
        present = _honesteval_runs(db)
        assert sorted(present) == sorted([*kept, running])
        assert _rows(db, "SELECT count(*) FROM flow_run WHERE id = ?", foreign) == [(1,)]
        assert _referenced_runs(db) <= {*kept, foreign, running}
        assert sorted(p.name for p in (home / "storage").iterdir()) == sorted(_result_files(db))
        assert len(_result_files(db)) == len(kept)
        sizes[run] = _checkpointed_size(db)
    # Each run here is the same work: 3 tasks x 2 trials, 6 + 6 + 1 task runs.
    assert _rows(db, "SELECT count(*) FROM task_run")[0][0] == (keep + 1) * 13
    # Freed pages are reused: once the kept set is full (run 2), the file stops growing by a
    # run's worth each time (run 1 -> 2 is one run's growth; 2 -> 4 is two more runs).
    assert sizes[4] - sizes[2] < sizes[2] - sizes[1]
