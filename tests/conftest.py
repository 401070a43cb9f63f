"""Test set-up: Prefect offline, in a throw-away PREFECT_HOME, one harness per session."""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile

# Before anything imports prefect: its settings are read at import.
_PREFECT_HOME = tempfile.mkdtemp(prefix="honesteval-test-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "90"
os.environ.pop("PREFECT_API_URL", None)
# Every CLI process a test starts inherits this: a temporary server per command, which dies
# with it (what the tests of interruptions and leftovers assert). A reusable server would
# outlive the test that started it; the tests about it (tests/e2e/test_server_lifecycle.py)
# ask for one explicitly, in a home of their own, and stop it.
os.environ["HONESTEVAL_SERVER_MODE"] = "per-command"

# A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and so would every process it starts: `honesteval serve` and a Prefect worker, which
# the tests stop with SIGINT as a user stops them with Ctrl-C, would then never stop. Python's
# own handler here means SIG_DFL in every child (a handler is reset by exec, SIG_IGN is not).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.helpers import ProjectFactory, copy_database, migrate_into  # noqa: E402

# The tier is the folder: tests/unit runs in seconds with no Prefect (`make test-fast`);
# tests/orchestration (flows in process) and tests/e2e (CLI processes, servers) are slow.
_TESTS = Path(__file__).resolve().parent
_SLOW_FOLDERS = {"orchestration", "e2e"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = (
            item.path.resolve().relative_to(_TESTS).parts
            if _TESTS in item.path.resolve().parents
            else ()
        )
        if parts and parts[0] in _SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _no_reusable_server_left() -> Iterator[None]:
    """Should anything start a reusable server in the session's PREFECT_HOME after all, it is
    stopped when the session ends, not left idle for minutes."""
    yield
    from honesteval.server.sitting import stop_server

    stop_server(lambda _line: None)


@pytest.fixture(scope="session")
def prefect_backend() -> Iterator[str]:
    """One temporary Prefect server for the whole session; yields its API URL."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    from honesteval.orchestration.flow_runs import quiet_in_process_runs

    # In-process flow runs, as the CLI makes them (no heartbeat thread to join per run).
    with prefect_test_harness(server_startup_timeout=90), quiet_in_process_runs():
        yield PREFECT_API_URL.value()


@pytest.fixture
def make_project(tmp_path) -> ProjectFactory:
    return ProjectFactory(tmp_path)


@pytest.fixture
def cli_env(prefect_backend: str) -> dict[str, str]:
    """Environment for a CLI subprocess that talks to the session's Prefect server."""
    env = dict(os.environ)
    env["PREFECT_API_URL"] = prefect_backend
    return env


@pytest.fixture(scope="session")
def session_cli_env(prefect_backend: str) -> dict[str, str]:
    """:func:`cli_env` for module- and session-scoped fixtures (a state built once and read,
    or copied, by many tests). Copy it before changing it."""
    return {**os.environ, "PREFECT_API_URL": prefect_backend}


@pytest.fixture(scope="session")
def migrated_prefect_db(tmp_path_factory, worker_id: str) -> Path:
    """Prefect's SQLite database, created and migrated once for the whole run (every xdist
    worker waits on one lock and reads the same file): ~4.5 CPU s a server boot saves when it
    starts on a copy instead of migrating an empty home (docs/performance.md). The file holds
    the schema and its ``alembic_version`` row, no path and no run: Prefect takes a copy as
    its own (it finds the revision current and migrates nothing)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # this run's folder, above each worker's own
    seed = shared / "migrated-prefect" / "prefect.db"
    with (shared / "migrated-prefect.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not seed.exists():
            migrate_into(seed)
    return seed


@pytest.fixture(scope="session", autouse=True)
def _session_home_migrated(request: pytest.FixtureRequest) -> None:
    """The session's PREFECT_HOME starts from :func:`migrated_prefect_db` when slow tests
    run: the first temporary server of each worker does not migrate it (~4.5 CPU s). The
    tests of a first boot use homes of their own."""
    database = Path(_PREFECT_HOME) / "prefect.db"
    slow = any(item.get_closest_marker("slow") for item in request.session.items)
    if slow and not database.exists():
        copy_database(request.getfixturevalue("migrated_prefect_db"), database)


@pytest.fixture
def seed_prefect_home(migrated_prefect_db: Path) -> Callable[[Path], Path]:
    """Make a PREFECT_HOME holding a copy of :func:`migrated_prefect_db`, for a test that
    needs a home of its own but is not about a first boot: its server starts as a user's
    second one does. The tests of the first boot start from an empty home."""

    def seed(home: Path) -> Path:
        home.mkdir(parents=True, exist_ok=True)
        copy_database(migrated_prefect_db, home / "prefect.db")
        return home

    return seed


@pytest.fixture(autouse=True)
def _no_stop_left_behind() -> Iterator[None]:
    """A test that stops a run in this process (a simulated full disk, a signal) leaves the
    process-wide stop set: every later test in the same worker would see its trials
    abandoned. Forget it after each test, as a new process would."""
    yield
    from honesteval import interrupts

    interrupts.reset()


if os.environ.get("HONESTEVAL_CENSUS"):
    # The process census (tests/census/): which test each logged process belongs to.
    import json
    import time

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
        started = time.time()
        yield
        record = {"event": "test", "pid": os.getpid(), "nodeid": item.nodeid}
        with open(os.environ["HONESTEVAL_CENSUS"], "a") as fh:
            fh.write(json.dumps({**record, "t0": started, "t1": time.time()}) + "\n")
