"""What the CLI's temporary Prefect server may skip when it boots, and when that is safe.

Each boot of Prefect's server brings its database to the newest schema (alembic reads every
migration script to find the newest one, even when there is nothing to do) and makes sure
Prefect's block types are registered (it loads the installed collections and hashes every
block schema to see whether that was done before). Together ~0.5 s of a ~5.5 s boot here,
paid by every CLI command run without a long-lived server (median of 8 alternating boots
each: 5.99 s with both, 5.47 s without).

After a boot that did both on its home's default database, the server leaves
``$PREFECT_HOME/honesteval-schema.json``: the Prefect version, the Prefect collections
installed, the database, and the schema revision the database is at. A later boot skips both
only when all of that still holds. Anything else boots as Prefect does: Prefect upgraded or
downgraded, a collection added or removed, the database deleted, replaced, or migrated by
another Prefect, a database someone configured (only the home's default one is known), or any
of Prefect's own settings for these two steps set by the user.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA_FILE = "honesteval-schema.json"
#: The server's log line for a boot that skips both.
SKIPPING = "honesteval: database schema known current: no migrations, no block registration"
#: Prefect's settings for the two steps (by their ``prefect.settings`` names), each with every
#: environment variable Prefect reads it from, current name and legacy one: a user who set any
#: of them gets exactly that.
SWITCHES: dict[str, tuple[str, ...]] = {
    "PREFECT_API_DATABASE_MIGRATE_ON_START": (
        "PREFECT_SERVER_DATABASE_MIGRATE_ON_START",
        "PREFECT_API_DATABASE_MIGRATE_ON_START",
    ),
    "PREFECT_API_BLOCKS_REGISTER_ON_START": (
        "PREFECT_SERVER_REGISTER_BLOCKS_ON_START",
        "PREFECT_API_BLOCKS_REGISTER_ON_START",
    ),
    "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION": (
        "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION",
        "PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION",
    ),
}


def schema_revision(database: Path) -> str | None:
    """The alembic revision ``database`` is at; None when it has none (a new file, a
    database that is not Prefect's) or cannot be read."""
    if not database.is_file():
        return None
    with contextlib.suppress(sqlite3.Error):
        uri = f"{database.resolve().as_uri()}?mode=ro"  # read only; any path, escaped
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        finally:
            conn.close()
        if len(rows) == 1:
            return str(rows[0][0])
    return None


def boot_facts(database: Path) -> dict[str, Any] | None:
    """What a skip depends on, as the marker records it; None when the database has no
    schema revision (nothing to trust). Imports Prefect (the server process has it loaded)."""
    from importlib.metadata import entry_points

    import prefect

    revision = schema_revision(database)
    if revision is None:
        return None
    collections = sorted(
        f"{ep.name}={ep.value} {ep.dist.version if ep.dist else ''}".strip()
        for ep in entry_points(group="prefect.collections")
    )
    return {
        "prefect": prefect.__version__,
        "collections": collections,
        "database": str(database.resolve()),
        "revision": revision,
    }


def known_current(home: Path, database: Path | None) -> bool:
    """Whether this boot may skip migrations and block registration (see the module)."""
    if database is None or any(n in os.environ for names in SWITCHES.values() for n in names):
        return False
    try:
        recorded = json.loads((home / SCHEMA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and recorded == boot_facts(database)


def remember(home: Path, database: Path) -> None:
    """After a boot that migrated and registered: record what it left (atomically)."""
    from honesteval.store.state_dir import atomic_write_json

    facts = boot_facts(database)
    if facts is not None:
        atomic_write_json(home / SCHEMA_FILE, facts)


def skipped_settings() -> dict[Any, bool]:
    """Prefect settings for a boot that skips both steps (for ``temporary_settings``)."""
    import prefect.settings

    return {getattr(prefect.settings, name): False for name in SWITCHES}
