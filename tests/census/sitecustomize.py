"""Process census for the test suite (docs/performance.md): with this folder first on
PYTHONPATH and HONESTEVAL_CENSUS=<file>, every Python process the tests start appends one JSON
line when it starts and one when it exits (its CPU seconds). tests/census_table.py reads them."""

import atexit
import json
import os
import resource
import time

_LOG = os.environ.get("HONESTEVAL_CENSUS")


def _write(record: dict[str, object]) -> None:
    assert _LOG is not None
    with open(_LOG, "a") as fh:  # one short line per write: appends do not interleave
        fh.write(json.dumps(record) + "\n")


def _exited() -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _write(
        {
            "pid": os.getpid(),
            "event": "exit",
            "t": time.time(),
            "cpu": usage.ru_utime + usage.ru_stime,
        }
    )


if _LOG:
    with open("/proc/self/cmdline", "rb") as fh:
        _argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    _home = os.environ.get("PREFECT_HOME", "")
    _write(
        {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "event": "start",
            "t": time.time(),
            "argv": _argv[1:8],
            "api_url": bool(os.environ.get("PREFECT_API_URL")),
            "home": _home,
            "home_has_db": os.path.exists(os.path.join(_home, "prefect.db")) if _home else None,
            "db_url": os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL", ""),
            "mode": os.environ.get("HONESTEVAL_SERVER_MODE", ""),
        }
    )
    atexit.register(_exited)
