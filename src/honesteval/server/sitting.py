"""A Prefect server for the sitting: the first command that needs one starts it, the next ones
reuse it, and it stops by itself once it has been idle for a while (issue 28).

Settings (environment variables, read by each command):

* ``HONESTEVAL_SERVER_MODE``: ``reuse`` (default) or ``per-command`` (a temporary server that
  lives and dies with each command, as before). Either way a server that is already up and
  announced in this ``PREFECT_HOME`` (this one, or ``honesteval server``) is used.
* ``HONESTEVAL_SERVER_IDLE_S``: seconds without any API request before the server stops
  (default 600). Idle means: no HTTP request or websocket in flight and none started for that
  long. A command using the server asks it for ``/health`` every second from the moment it
  chose it until it ends, and a flow run talks to it all along, so a server is idle only when
  no command uses it (a command killed with SIGKILL stops asking: its server is still reaped).

Files in ``$PREFECT_HOME``:

* ``honesteval-server.json``: the announcement (address, pid and its start time, kind). The
  command that starts the server writes it at once, before the server answers, so a second
  command finds the server while it boots rather than starting another.
* ``honesteval-server.lock``: held while a command reads the announcement and starts a server
  (two first commands at once: one starts it, the other joins), and by the server while it
  retires (it withdraws its announcement only when no command holds the lock and it is still
  idle, so a command never picks a server that is about to go).
* ``honesteval-server.life.lock``: held by a reusable server for as long as it lives; a new
  one waits for it before booting, so two never run on one home, even while an old one
  finishes its shutdown.
* ``honesteval-server.log``: what the reusable server wrote (its last start's).

A server killed with SIGKILL leaves its announcement: its pid is gone (or a different process,
seen by its start time, or a zombie), so the next command removes it and starts a new server.

Plain standard library: importing this module imports neither Prefect nor httpx.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError, HonestevalError

MODE_VAR = "HONESTEVAL_SERVER_MODE"
IDLE_VAR = "HONESTEVAL_SERVER_IDLE_S"
MAX_MB_VAR = "HONESTEVAL_SERVER_MAX_MB"
REUSE, PER_COMMAND = "reuse", "per-command"
DEFAULT_IDLE_S = 600.0
#: Resident memory above which a reusable server retires at its next quiet moment. Its memory
#: grows ~0.45 MB per recorded 200-trial run whether its database is pruned or not (measured:
#: docs/performance.md), from ~260 MB after its boot: ~500 such runs per server.
DEFAULT_MAX_MB = 500.0
#: A quiet moment: no API request for this long (a command using the server asks it every
#: second at the least, ten times in this span), so no command is using it.
QUIET_S = 10.0
#: The announcement's ``kind`` for a server started by a command (``honesteval server``
#: writes none).
REUSABLE = "reusable"
LOCK_FILE = "honesteval-server.lock"
LIFE_LOCK_FILE = "honesteval-server.life.lock"
LOG_FILE = "honesteval-server.log"
#: How long a command waits for another one that holds the lock (it holds it for milliseconds:
#: a read, a health check, a process start).
LOCK_WAIT_S = 60.0
#: How long ``honesteval server stop`` waits for the server to exit before it kills it.
STOP_WAIT_S = 30.0
_PROC = Path("/proc")
#: The reusable servers this process started (kept referenced: a Popen object collected while
#: its process runs warns that it is still running).
_started: list[subprocess.Popen[bytes]] = []


#: Offline-friendly, quiet defaults for Prefect; a user's own environment wins.
PREFECT_DEFAULTS = {
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
}


def prefect_defaults() -> None:
    """Set :data:`PREFECT_DEFAULTS` where the environment does not say otherwise (the CLI's
    process, before it starts a server: the server inherits them)."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


def server_mode() -> str:
    """``reuse`` or ``per-command``, from :data:`MODE_VAR`; anything else is one clear error."""
    raw = os.environ.get(MODE_VAR, "").strip().lower() or REUSE
    if raw not in (REUSE, PER_COMMAND):
        raise ConfigError(f"{MODE_VAR} must be {REUSE} or {PER_COMMAND}, got {raw!r}")
    return raw


def idle_setting() -> float:
    """Seconds a reusable server waits, idle, before it stops (:data:`IDLE_VAR`)."""
    return _positive(IDLE_VAR, DEFAULT_IDLE_S, "a number of seconds")


def max_mb_setting() -> float:
    """Resident MB above which a reusable server retires once quiet (:data:`MAX_MB_VAR`)."""
    return _positive(MAX_MB_VAR, DEFAULT_MAX_MB, "a number of megabytes")


def _positive(var: str, default: float, what: str) -> float:
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{var} must be {what} > 0, got {raw!r}")
    return value


def server_settings() -> tuple[float, float]:
    """(idle seconds, memory limit in MB) of a reusable server started now: a bad setting is
    one line before anything starts."""
    return idle_setting(), max_mb_setting()


def _home() -> Path:
    from honesteval.server.server_process import prefect_home

    return prefect_home()


@contextlib.contextmanager
def home_lock(name: str = LOCK_FILE, wait_s: float | None = LOCK_WAIT_S) -> Iterator[bool]:
    """Hold ``$PREFECT_HOME/name`` exclusively (``flock``: released by the kernel when the holder
    dies, SIGKILL included). Yields True once held; with ``wait_s`` 0, False when another
    process holds it. A lock still held after ``wait_s`` is one clear error."""
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait_s == 0:
                    yield False
                    return
                if deadline is not None and time.monotonic() > deadline:
                    raise HonestevalError(
                        f"another honesteval command has held {home / name} for over "
                        f"{wait_s:g} s; if none is running, delete that file"
                    ) from None
                time.sleep(0.02)
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _start_time(pid: int) -> int | None:
    """:func:`honesteval.adapters.live_start_time`, imported when first needed: the
    adapters package imports every adapter and the models, ~0.2 s on an idle machine that
    would otherwise come before the server starts (in the CLI) and in its boot (the server
    imports this module)."""
    from honesteval.adapters import live_start_time

    return live_start_time(pid)


@dataclass(frozen=True)
class Announcement:
    """What ``honesteval-server.json`` says: a server's address and process."""

    api_url: str
    pid: int
    start: int | None  # the pid's start time when recorded (None: not recorded)
    kind: str  # REUSABLE, or "" for ``honesteval server``
    idle_s: float | None

    @property
    def reusable(self) -> bool:
        return self.kind == REUSABLE

    def running(self) -> bool:
        """Whether the announced process still runs (the same one: same start time)."""
        now = _start_time(self.pid)
        return now is not None and (self.start is None or now in (0, self.start))


def read_announcement() -> Announcement | None:
    from honesteval.server.server_process import SERVER_FILE

    try:
        info = json.loads((_home() / SERVER_FILE).read_text())
        idle = info.get("idle_s")
        start = info.get("start")
        return Announcement(
            api_url=str(info["api_url"]),
            pid=int(info["pid"]),
            start=None if start is None else int(start),
            kind=str(info.get("kind", "")),
            idle_s=None if idle is None else float(idle),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _withdraw(stale: Announcement) -> None:
    """Remove the announcement if it is still ``stale``'s (call with the lock held)."""
    from honesteval.server.server_process import SERVER_FILE

    if read_announcement() == stale:
        with contextlib.suppress(OSError):
            (_home() / SERVER_FILE).unlink()


@dataclass
class Chosen:
    """The server a command uses: announced (``started`` False) or started by it just now."""

    announcement: Announcement
    started: bool


def join_or_start(*, start: bool, booting_ok: bool) -> Chosen | None:
    """Under the lock: the announced server when it runs and answers (with ``booting_ok``, a
    reusable one that still boots too), else, with ``start``, a reusable server started now;
    else None. A stale announcement (its process gone) is removed either way."""
    from honesteval.server.server_process import healthy

    with home_lock():
        found = read_announcement()
        if found is not None:
            # A health check is an API request: under the lock, it keeps a reusable server
            # from retiring before this command's own requests begin.
            if found.running() and (
                healthy(found.api_url, timeout_s=5.0) or (booting_ok and found.reusable)
            ):
                return Chosen(found, started=False)
            if not found.running():
                _withdraw(found)
        if not start:
            return None
        return Chosen(_start_reusable(), started=True)


def _start_reusable() -> Announcement:
    """Start a reusable server and announce it (with the lock held)."""
    from honesteval.server.retention import keep_runs_setting
    from honesteval.server.server_process import (
        REUSABLE_RECORDING_SETTINGS,
        SERVER_FILE,
        server_command,
        temporary_server_env,
    )

    keep = keep_runs_setting()  # a bad setting is an error before anything starts
    idle, max_mb = server_settings()
    home = _home()
    log = (home / LOG_FILE).open("wb")
    try:
        extra = ["--reusable", "--idle-s", repr(idle), "--max-mb", repr(max_mb)]
        argv, api_url = server_command(keep, extra)
        env = temporary_server_env(os.environ, REUSABLE_RECORDING_SETTINGS)
        env["PREFECT_UI_API_URL"] = api_url  # its UI, built when `honesteval ui` asks for it
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,  # its own group: a Ctrl-C in this terminal leaves it be
        )
    finally:
        log.close()
    _started.append(proc)  # never waited for: it outlives this command (then init reaps it)
    announced = Announcement(api_url, proc.pid, _start_time(proc.pid), REUSABLE, idle)
    path = home / SERVER_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    body = {k: v for k, v in announced.__dict__.items() if v is not None}
    tmp.write_text(json.dumps(body))
    os.replace(tmp, path)
    return announced


#: Reusable servers this process started before it knew whether it needed one.
_early: list[Announcement] = []


def start_early() -> None:
    """At the start of a command that may need Prefect: in ``reuse`` mode, with no server
    configured, join or start the reusable server now, so it boots while the command imports,
    reads the project and plans (the command finds it announced when it needs it). A command
    that then needs no server (every trial stored, bad input) leaves it for the next one; it
    stops once idle like any other."""
    if os.environ.get("PREFECT_API_URL") or server_mode() != REUSE:
        return
    server_settings()  # a bad setting is one line before anything starts
    chosen = join_or_start(start=True, booting_ok=True)
    if chosen is not None and chosen.started:
        _early.append(chosen.announcement)
    if chosen is not None:
        hold(chosen.announcement)


def started_here(announced: Announcement) -> bool:
    """Whether this process started ``announced`` (:func:`start_early`)."""
    return announced in _early


def log_tail(lines: int = 1) -> list[str]:
    """The last lines the reusable server of this home wrote."""
    try:
        text = (_home() / LOG_FILE).read_text(errors="replace")
    except OSError:
        return []
    return text.strip().splitlines()[-lines:]


class KeepAlive:
    """Ask the server for ``/health`` every ``period_s`` while a command uses it: an API
    request, so the server does not count as idle (a slow first flow run is still in its
    imports). Errors are ignored: a server that went away is the run's watch's to report."""

    def __init__(self, api_url: str, period_s: float):
        self._done = threading.Event()

        def ask() -> None:
            while not self._done.wait(period_s):
                with (
                    contextlib.suppress(OSError, ValueError),
                    urllib.request.urlopen(f"{api_url}/health", timeout=5),
                ):
                    pass

        self._thread = threading.Thread(target=ask, daemon=True, name="honesteval-keep-alive")
        self._thread.start()

    def stop(self) -> None:
        self._done.set()


_held: dict[str, KeepAlive] = {}


def hold(announced: Announcement) -> bool:
    """Keep a reusable server from retiring until :func:`release` (one :class:`KeepAlive`
    per server; nothing for ``honesteval server``, which never retires). True when this call
    started holding it (False: held already, or nothing to hold)."""
    if not announced.reusable or announced.api_url in _held:
        return False
    period = 1.0 if announced.idle_s is None else max(0.05, min(1.0, announced.idle_s / 4))
    _held[announced.api_url] = KeepAlive(announced.api_url, period)
    return True


def release(api_url: str) -> None:
    """Stop holding the server at ``api_url``: it may retire once idle."""
    held = _held.pop(api_url, None)
    if held is not None:
        held.stop()


def stop_server(echo: Callable[[str], None]) -> int:
    """``honesteval server stop``: stop the server announced in this ``PREFECT_HOME`` (a
    reusable one, or ``honesteval server``): SIGTERM, then SIGKILL after :data:`STOP_WAIT_S`.
    Exit code 0 whether there was one or not."""
    with home_lock():
        found = read_announcement()
        if found is None or not found.running():
            if found is not None:
                _withdraw(found)
            echo(f"no honesteval Prefect server is running for PREFECT_HOME={_home()}")
            return 0
        _withdraw(found)  # no command picks it from now on
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while found.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    how = "stopped"
    if found.running():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if found.reusable:
                os.killpg(found.pid, signal.SIGKILL)  # it leads its own group
            else:
                os.kill(found.pid, signal.SIGKILL)
        how = "killed (it ignored SIGTERM for 30 s)"
    kind = "reusable server" if found.reusable else "server (`honesteval server`)"
    echo(f"{how} the Prefect {kind} at {found.api_url} (pid {found.pid})")
    return 0


# -- in the server process ---------------------------------------------------------------------


class Activity:
    """API requests in flight and when the last one started or ended (monotonic clock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0
        self.started = 0  # requests so far
        self.last = time.monotonic()

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.started += 1
            self.last = time.monotonic()

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self.last = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight."""
        with self._lock:
            return 0.0 if self.in_flight else time.monotonic() - self.last


ASGIApp = Callable[[dict[str, Any], Any, Any], Any]


class CountRequests:
    """ASGI middleware: every HTTP request and websocket counts as activity while it lasts;
    ``on_ready`` is called once the app has started (its boot never counts as idle)."""

    def __init__(self, app: ASGIApp, activity: Activity, on_ready: Callable[[], None]):
        self.app = app
        self.activity = activity
        self.on_ready = on_ready

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":

            async def send_and_notice(message: dict[str, Any]) -> None:
                await send(message)
                if message.get("type") == "lifespan.startup.complete":
                    self.activity.begin()
                    self.activity.end()  # idle from now on, not from the boot's start
                    self.on_ready()

            await self.app(scope, receive, send_and_notice)
            return
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        self.activity.begin()
        try:
            await self.app(scope, receive, send)
        finally:
            self.activity.end()


#: A reusable server prunes its database this often while commands use it (see
#: :func:`tend`).
PRUNE_EVERY_S = 30.0


def resident_mb() -> float | None:
    """This process's resident memory (VmRSS) in MB; None without /proc."""
    try:
        for line in (_PROC / "self" / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def tend(
    activity: Activity,
    idle_s: float,
    grace_s: float,
    prune: Callable[[], None],
    max_mb: float = DEFAULT_MAX_MB,
    prune_every_s: float = PRUNE_EVERY_S,
) -> None:
    """In the reusable server, once it serves, a thread that:

    * prunes its database (``prune``: the retention a temporary server applies when it
      starts) every ``prune_every_s`` while requests come in. A temporary server prunes at
      each start; this one may serve a whole day of runs, and its memory follows its
      database (Prefect gives each SQLite connection a page cache of up to 20,000 pages);
    * once idle for ``idle_s`` with no command holding the lock, withdraws the announcement
      and stops (SIGTERM to itself: uvicorn shuts down gracefully; ``os._exit`` after
      ``grace_s`` if that hangs);
    * stops the same way at a quiet moment (:data:`QUIET_S`: no command uses it) once its
      resident memory exceeds ``max_mb``: its memory grows with the runs it has served,
      pruned database or not, and the next command starts a fresh server.
    """
    me = os.getpid()

    def watch() -> None:
        poll = max(0.05, min(1.0, idle_s / 4))
        pruned_at, pruned_after = time.monotonic(), activity.started
        while True:
            time.sleep(poll)
            now = time.monotonic()
            if activity.started != pruned_after and now - pruned_at >= prune_every_s:
                pruned_at, pruned_after = now, activity.started
                prune()
            quiet = min(idle_s, QUIET_S)
            if activity.idle_for() < quiet:
                continue
            mb = resident_mb()
            if mb is not None and mb > max_mb:
                wait_s, why = quiet, f"resident memory {mb:.0f} MB > {max_mb:g} MB while quiet"
            else:
                wait_s, why = idle_s, f"idle for {idle_s:g} s"
            if activity.idle_for() < wait_s:
                continue
            with home_lock(wait_s=0) as held:
                if not held or activity.idle_for() < wait_s:
                    continue  # a command is choosing a server right now: it may pick this one
                found = read_announcement()
                if found is not None and found.pid == me:
                    _withdraw(found)
            print(f"honesteval: {why}: stopping", file=sys.stderr, flush=True)
            os.kill(me, signal.SIGTERM)
            time.sleep(grace_s)
            os._exit(1)

    threading.Thread(target=watch, daemon=True, name="honesteval-tend").start()


def hold_life_lock(wait_s: float = 60.0) -> Any:
    """In the reusable server, before it boots: hold the life lock for the process's whole life
    (returns what keeps it held). Waits for a previous server that is still shutting down;
    raises :class:`HonestevalError` when one is still there after ``wait_s``."""
    stack = contextlib.ExitStack()
    stack.enter_context(home_lock(LIFE_LOCK_FILE, wait_s))
    return stack
