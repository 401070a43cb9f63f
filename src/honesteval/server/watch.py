"""End a run within seconds when its long-lived Prefect server goes away.

Without this, a CLI whose ``honesteval server`` was stopped mid-run went on for minutes:
Prefect's client retries every call and prints reconnect warnings and tracebacks, although
every finished trial was already stored. The watch polls the server's health; when the
server refuses connections twice in a row (it is gone, not slow: a slow answer is never
taken for a loss), the run stops as a Ctrl-C stops it (no new target, target processes
stopped, python calls given :data:`~honesteval.interrupts.GRACE_S` to store what they
produced), the CLI prints one line and exits 2. Nothing on disk depends on the server.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from honesteval import interrupts

#: Seconds between two health checks of the server.
POLL_S = 1.0
#: Refused connections in a row that mean the server is gone.
REFUSALS = 2
#: The exit code of a run whose server went away (an error the user must act on).
EXIT_SERVER_LOST = 2


def refused(api_url: str, timeout_s: float = 5.0) -> bool:
    """True when nothing listens at the server's address any more (connection refused);
    False when it answers, or is merely slow."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout_s):
            return False
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, ConnectionRefusedError)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


@contextlib.contextmanager
def server_watch(api_url: str) -> Iterator[None]:
    """While the block runs, end the process within seconds if the server at ``api_url``
    goes away (see the module docstring)."""
    done = threading.Event()

    def watch() -> None:
        strikes = 0
        while not done.wait(POLL_S):
            strikes = strikes + 1 if refused(api_url) else 0
            if strikes >= REFUSALS and not done.is_set():
                _server_lost(api_url)

    thread = threading.Thread(target=watch, daemon=True, name="honesteval-server-watch")
    thread.start()
    try:
        yield
    finally:
        done.set()


def _server_lost(api_url: str) -> None:
    interrupts.request_stop()
    time.sleep(interrupts.GRACE_S)  # python targets store what they produced
    interrupts.kill_children_now()
    line = (
        f"error: the Prefect server at {api_url} is gone (connection refused); every trial "
        "finished so far is stored: run the same command to resume\n"
    )
    with contextlib.suppress(OSError):
        os.write(2, line.encode())
    os._exit(EXIT_SERVER_LOST)
