"""The temporary server skips migrations and block registration only when its database is
known to be at the schema this Prefect made, and boots as Prefect does otherwise."""

from __future__ import annotations

import json
import sqlite3
import time
import urllib.request
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from honesteval.server.boot import SCHEMA_FILE, SKIPPING, SWITCHES, known_current, remember
from honesteval.server.localserver import TemporaryServer
from honesteval.server.server_process import TRIGGERS_SETTING


def _database(path: Path, revision: str) -> Path:
    """A database with an alembic revision, as Prefect's migrations leave it."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS alembic_version (version_num VARCHAR(32))")
        conn.execute("DELETE FROM alembic_version")
        conn.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
    conn.close()
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    for name in (*(n for names in SWITCHES.values() for n in names), *TRIGGERS_SETTING):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_the_marker_records_this_prefect_and_the_databases_revision(home):
    db = _database(home / "prefect.db", "abc123")
    assert not known_current(home, db)  # no marker yet
    remember(home, db)
    marker = json.loads((home / SCHEMA_FILE).read_text())
    assert marker["prefect"] == version("prefect")
    assert marker["revision"] == "abc123"
    assert marker["database"] == str(db.resolve())
    assert known_current(home, db)


def test_a_home_whose_path_has_uri_characters_is_read_as_it_is(home):
    odd = home / "a#b?c%20d"
    odd.mkdir()
    db = _database(odd / "prefect.db", "abc123")
    remember(odd, db)
    assert json.loads((odd / SCHEMA_FILE).read_text())["revision"] == "abc123"
    assert known_current(odd, db)


def test_anything_that_changed_since_means_a_full_boot(home, monkeypatch):
    db = _database(home / "prefect.db", "abc123")
    remember(home, db)
    marker = home / SCHEMA_FILE
    recorded = marker.read_text()

    _database(db, "def456")  # migrated by another Prefect
    assert not known_current(home, db)
    _database(db, "abc123")
    assert known_current(home, db)

    marker.write_text(recorded.replace(version("prefect"), "0.0.1"))  # Prefect upgraded since
    assert not known_current(home, db)
    marker.write_text(json.dumps({**json.loads(recorded), "collections": []}))  # one added
    assert not known_current(home, db)
    marker.write_text("{not json")
    assert not known_current(home, db)
    marker.write_text(recorded)
    assert known_current(home, db)

    assert not known_current(home, None)  # a database someone configured
    for names in SWITCHES.values():  # the user's own say, under either of Prefect's names
        for name in names:
            monkeypatch.setenv(name, "true")
            assert not known_current(home, db), name
            monkeypatch.delenv(name)
    assert known_current(home, db)
    db.unlink()  # deleted: Prefect makes a new one
    assert not known_current(home, db)


def _environment_names(accessor: str) -> set[str]:
    """Every environment variable Prefect reads the setting at ``accessor`` from."""
    from prefect.settings import Settings

    model: Any = Settings
    *path, leaf = accessor.split(".")
    for part in path:
        model = model.model_fields[part].annotation
    alias = model.model_fields[leaf].validation_alias
    return {choice.upper() for choice in alias.choices if isinstance(choice, str)}


def test_every_name_prefect_reads_a_switch_from_is_known():
    import prefect.settings

    for setting, names in SWITCHES.items():
        assert set(names) == _environment_names(getattr(prefect.settings, setting).accessor)
    assert set(TRIGGERS_SETTING) == _environment_names("server.services.triggers.enabled")


def _block_types(api_url: str) -> list[str]:
    request = urllib.request.Request(
        f"{api_url}/block_types/filter", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return sorted(t["slug"] for t in json.loads(reply.read()))


def _marker(home: Path) -> dict[str, object] | None:
    path = home / SCHEMA_FILE
    return json.loads(path.read_text()) if path.exists() else None


def _triggers_enabled(api_url: str) -> bool:
    """Whether the server's automations (triggers and actions services) run, as it says."""
    with urllib.request.urlopen(f"{api_url}/admin/settings", timeout=30) as reply:
        return bool(json.loads(reply.read())["server"]["services"]["triggers"]["enabled"])


def _boot(home: Path, until: Callable[[dict[str, object] | None], bool]) -> tuple[str, list[str]]:
    """Boot a temporary server; its log and block types, once its marker satisfies ``until``
    (the server writes it after it answers)."""
    with TemporaryServer() as server:
        api_url = server.wait_ready()
        types = _block_types(api_url)
        # No automations in a server that dies with the command (a user's setting would win).
        assert not _triggers_enabled(api_url)
        deadline = time.monotonic() + 60
        while not until(_marker(home)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return server.log(), types


@pytest.mark.slow
def test_a_second_boot_skips_what_the_first_did_and_a_prefect_upgrade_does_not(home, monkeypatch):
    monkeypatch.setenv("PREFECT_HOME", str(home))
    db = home / "prefect.db"

    log, types = _boot(home, until=lambda marker: marker is not None)
    assert SKIPPING not in log
    assert types  # Prefect registered its block types
    with sqlite3.connect(db) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    conn.close()
    assert json.loads((home / SCHEMA_FILE).read_text())["revision"] == revision

    # The skip reaches the server: with Prefect's own memo of the registration gone and
    # the block types deleted, a full boot would register them again; this one does not.
    (home / "memo_store.toml").unlink()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("DELETE FROM block_schema")
        conn.execute("DELETE FROM block_type")
    conn.close()
    log, skipped_types = _boot(home, until=lambda marker: True)
    assert SKIPPING in log
    assert skipped_types == []

    # Prefect "upgraded": the marker names another version, so the boot is full again.
    marker = home / SCHEMA_FILE
    marker.write_text(marker.read_text().replace(version("prefect"), "0.0.1"))
    upgraded = {**json.loads(marker.read_text()), "prefect": version("prefect")}
    log, types_again = _boot(home, until=lambda found: found == upgraded)
    assert SKIPPING not in log
    assert types_again == types
    assert _marker(home) == upgraded
