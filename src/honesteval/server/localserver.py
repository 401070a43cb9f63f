"""Prefect servers on this machine, in one home: the CLI's temporary server, ``honesteval
server`` (long-lived) and a throw-away one for tests and benchmarks. One module because they
share what a local server needs: a free port, a health check, a process-group stop.

The Prefect API the CLI talks to is a long-lived server when one is up, else a temporary one
that lives and dies with the CLI process, even when the CLI is killed with SIGKILL.

Prefect 3 has no API-less mode: without ``PREFECT_API_URL`` its first flow call starts a
temporary server subprocess and stops it at exit (``atexit``), which a SIGKILL skips, leaving
the server running for good. honesteval starts that server itself instead:

* in its own process group, so stopping it stops everything it started;
* with a parent-death signal (``PR_SET_PDEATHSIG``, Linux) *and* a thread that polls the
  parent pid (every platform), so it shuts down as soon as the CLI is gone;
* tagged with the CLI's pid on its command line, so a later CLI reaps leftovers of versions
  or platforms where neither guard held (``reap_orphans``).

A long-lived server is used when ``PREFECT_API_URL`` is set or a server is announced in
``$PREFECT_HOME/honesteval-server.json``: ``honesteval server``, or the reusable server the
first command of a sitting starts (:mod:`honesteval.server.sitting`, the default;
``HONESTEVAL_SERVER_MODE=per-command`` keeps a temporary server per command).

Run as ``python -m honesteval.server.localserver --parent PID --port PORT [--keep-runs N]`` this
module *is* the temporary server (with ``--reusable --idle-s S`` instead of ``--parent``, the
reusable one) (it prunes its Prefect home first: ``prefect_retention``;
it skips migrations and block registration when they are known done: ``server_boot``; it
runs no automations: :func:`temporary_server_env`).
Importing it imports neither Prefect nor httpx (the CLI stays fast).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from honesteval.errors import HonestevalError
from honesteval.server import sitting
from honesteval.server.boot import SKIPPING, known_current, remember, skipped_settings
from honesteval.server.database import set_aside_if_corrupt, take_notice
from honesteval.server.retention import default_database, keep_runs_setting, prune_temporary_home
from honesteval.server.server_process import (
    SERVER_FILE,
    SERVER_MODULE,
    free_port,
    healthy,
    prefect_home,
    server_command,
    server_env,
    temporary_server_env,
)

_MODULE = SERVER_MODULE
# How a server is found in the process table: its module, or the module's name before the
# redesign moved it (a server started by an older install is still reaped).
_TAGS = {_MODULE.encode(), b"honesteval.localserver"}
_PARENT_POLL_S = 0.5
_HEALTH_POLL_S = 0.05
#: After a graceful stop request the server gets this long before it is killed.
_STOP_GRACE_S = 5.0
#: A server whose parent is gone exits at most this long after its graceful shutdown began.
_ORPHAN_GRACE_S = 15.0


def wait_healthy(
    api_url: str,
    timeout_s: float = 120.0,
    proc: subprocess.Popen[bytes] | None = None,
    running: Callable[[], bool] | None = None,
) -> bool:
    """Poll until ``api_url`` is healthy (True), ``timeout_s`` passes or the server process
    exits (False): ``proc`` when this process started it, else ``running`` says whether it
    still runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if running is not None and not running():
            return False
        if healthy(api_url, timeout_s=2.0):
            return True
        time.sleep(_HEALTH_POLL_S)
    return False


def stop_group(
    proc: subprocess.Popen[bytes],
    sig: int = signal.SIGTERM,
    timeout_s: float = 30.0,
    *,
    strict: bool = True,
) -> None:
    """Signal a process started with ``start_new_session`` and wait until its whole group is
    gone; SIGKILL the group when it is still there after ``timeout_s``.

    ``strict``: a group that had to be killed is an error (tests and benchmarks: a server that
    ignores its stop signal is a bug). Otherwise it is killed quietly (the CLI at exit).
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout_s)
        while _pid_alive(proc.pid, group=True) and time.monotonic() < deadline:
            time.sleep(0.05)
    if not _pid_alive(proc.pid, group=True):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    if strict:
        raise RuntimeError(f"{proc.args!r} ignored signal {sig} (or left processes behind); killed")


def _pid_alive(pid: int, *, group: bool = False) -> bool:
    """Whether process ``pid`` (with ``group``: any process of group ``pid``) exists."""
    try:
        (os.killpg if group else os.kill)(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_server_file(api_url: str, pid: int) -> Path:
    """Announce a long-lived server (``honesteval server``) to later CLI calls."""
    path = prefect_home() / SERVER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{pid}.tmp")
    tmp.write_text(json.dumps({"api_url": api_url, "pid": pid}))
    os.replace(tmp, path)
    return path


def remove_server_file(pid: int) -> None:
    """Remove the announcement if it is still the one ``pid`` wrote."""
    path = prefect_home() / SERVER_FILE
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()


def long_lived_api() -> tuple[str, str] | None:
    """``(api_url, where it came from)`` of a server that outlives the CLI and answers now
    (configured, or announced in this ``PREFECT_HOME``), or None. A reusable server found here
    is held for as long as this process lives (``honesteval serve``: it must not retire under
    a process that serves deployments)."""
    found = _configured_api()
    if found is not None:
        return found
    chosen = sitting.join_or_start(start=False, booting_ok=False)
    if chosen is None:
        return None
    sitting.hold(chosen.announcement)
    return chosen.announcement.api_url, _source(chosen)


def _configured_api() -> tuple[str, str] | None:
    """``(api_url, where it came from)`` when ``PREFECT_API_URL`` or Prefect's settings name
    a server."""
    url = os.environ.get("PREFECT_API_URL")
    if url:
        return url, "PREFECT_API_URL"
    if "prefect.settings" in sys.modules:  # a caller that imported Prefect and set its API
        from prefect.settings import PREFECT_API_URL

        if PREFECT_API_URL.value():
            return str(PREFECT_API_URL.value()), "the current Prefect settings"
    return None


def _source(chosen: sitting.Chosen) -> str:
    """How the CLI names an announced server (in its ``using the Prefect server at`` line)."""
    if not chosen.announcement.reusable:
        return "honesteval server"
    idle = chosen.announcement.idle_s
    until = "" if idle is None else f", until it has been idle {_duration(idle)}"
    return f"the reusable server of this PREFECT_HOME{until}"


def _duration(seconds: float) -> str:
    """``10 min``, ``90 s``, ``3 s``."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _tagged_servers() -> list[tuple[int, int]]:
    """``(server pid, parent pid it was started for)`` of every temporary server of this
    user (Linux: read from /proc; elsewhere the parent-pid watchdog is the only guard)."""
    found: list[tuple[int, int]] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    uid = os.getuid()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if _TAGS.intersection(argv) and b"--parent" in argv:
            with contextlib.suppress(ValueError, IndexError):
                found.append((int(entry.name), int(argv[argv.index(b"--parent") + 1])))
    return found


def reap_orphans() -> list[int]:
    """Kill temporary servers whose CLI is gone (leftovers of earlier runs); their pids."""
    reaped = []
    for pid, parent in _tagged_servers():
        if _pid_alive(parent) or pid == os.getpid():
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # it leads its own process group
            reaped.append(pid)
    return reaped


class TemporaryServer:
    """A Prefect server for this process only. Start it early (it takes seconds), do other
    work, then :meth:`wait_ready`; :meth:`stop` (or leaving the ``with`` block) ends it.

    Create it from a thread that lives as long as the server is needed (the main thread):
    Linux sends the parent-death signal when the *thread* that started the child exits.
    """

    def __init__(self) -> None:
        keep = keep_runs_setting()  # a bad setting is an error before anything starts
        reap_orphans()
        argv, self.api_url = server_command(keep, ["--parent", str(os.getpid())])
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        env = temporary_server_env(os.environ)
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            start_new_session=True,
        )

    def wait_ready(self, timeout_s: float | None = None) -> str:
        """Block until the server answers; its API URL. A server that dies or never answers
        is one clear error with the tail of its log."""
        limit = timeout_s or float(
            os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "60")
        )
        if wait_healthy(self.api_url, limit, self.proc):
            return self.api_url
        tail = self.log().strip().splitlines()[-1:]
        self.stop()
        raise HonestevalError(
            f"the temporary Prefect server did not start within {limit:g} s"
            + (f": {tail[0][:300]}" if tail else "")
            + " (or start one with `honesteval server`)"
        )

    def log(self) -> str:
        """What the server wrote to stderr so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        """SIGTERM the server's group, SIGKILL it after a grace period."""
        stop_group(self.proc, signal.SIGTERM, _STOP_GRACE_S, strict=False)
        self._log.close()

    def __enter__(self) -> TemporaryServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PrefectApi:
    """The server the CLI's flow runs report to, chosen before Prefect is imported.

    ``PREFECT_API_URL`` (or Prefect's settings) names one: it is used as it is. Else the server
    announced in this ``PREFECT_HOME`` (``honesteval server``, or the reusable server of the
    sitting, even while it boots). Else, by ``HONESTEVAL_SERVER_MODE``: a reusable server
    started now (default), or a temporary server for this command only (``per-command``).
    Either starts at once, so it boots while the CLI imports Prefect; :meth:`ready` waits
    for it. Every server but a temporary one is named in one line on stderr.
    ``PREFECT_API_URL`` is set in this process either way (Prefect reads it at import).
    """

    def __init__(self, echo: Callable[[str], None]) -> None:
        self.server: TemporaryServer | None = None
        self._echo = echo
        self._chosen: sitting.Chosen | None = None
        self._held = False
        self._previous = os.environ.get("PREFECT_API_URL")
        found = _configured_api()
        if found is not None:
            url, source = found
            echo(f"using the Prefect server at {url} ({source})")
        else:
            mode = sitting.server_mode()  # a bad setting: one line, before anything starts
            if mode == sitting.REUSE:
                sitting.server_settings()
            self._chosen = sitting.join_or_start(start=mode == sitting.REUSE, booting_ok=True)
            if self._chosen is None:
                self.server = TemporaryServer()
                url = self.server.api_url
            else:
                announced = self._chosen.announcement
                url = announced.api_url
                # It must not retire while this command uses it (a CLI command that started
                # it early holds it already, until it exits).
                self._held = sitting.hold(announced)
                if self._chosen.started or sitting.started_here(announced):
                    idle = _duration(announced.idle_s or sitting.DEFAULT_IDLE_S)
                    echo(
                        f"starting a Prefect server at {url} for this and later commands "
                        f"(it stops once idle {idle}; `honesteval server stop` stops it now)"
                    )
                else:
                    echo(f"using the Prefect server at {url} ({_source(self._chosen)})")
        self.api_url = url
        os.environ["PREFECT_API_URL"] = url

    @property
    def temporary(self) -> bool:
        """Whether the server lives only as long as this command (the end waits for it to
        record the last task runs; it has no watch, since it cannot go away by itself)."""
        return self.server is not None

    @property
    def may_still_boot(self) -> bool:
        """Whether :meth:`ready` may wait for a boot: a temporary server, or the reusable one of
        this ``PREFECT_HOME`` (started now, or by another command and still booting); not a
        configured server nor ``honesteval server``, which answer when chosen."""
        return self.server is not None or (
            self._chosen is not None and self._chosen.announcement.reusable
        )

    def ready(self) -> str:
        """Wait until the server answers; then mark ``Crashed`` the runs of commands that were
        killed while using it (in-process runs have no heartbeats)."""
        if self.server is not None:
            self.server.wait_ready()
            self._say_database_set_aside()
            return self.api_url
        if self._chosen is not None:
            limit = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "60"))
            announced = self._chosen.announcement
            if not wait_healthy(self.api_url, limit, running=announced.running):
                tail = sitting.log_tail() if announced.reusable else []
                raise HonestevalError(
                    f"the Prefect server at {self.api_url} (pid {announced.pid}) did not answer"
                    f" within {limit:g} s"
                    + (f": {tail[0][:300]}" if tail else "")
                    + " (its log: $PREFECT_HOME/honesteval-server.log)"
                )
            self._say_database_set_aside()
        from honesteval.server.live_runs import crash_dead_runs

        crash_dead_runs(self.api_url)
        return self.api_url

    def _say_database_set_aside(self) -> None:
        """The one line of a server that found its database corrupt and set it aside."""
        line = take_notice(prefect_home())
        if line is not None:
            self._echo(line)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self._held:
            sitting.release(self.api_url)
        if self._previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = self._previous

    def __enter__(self) -> PrefectApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- long-lived servers: ``honesteval server`` and a throw-away one for tests --------------------


def run_server(
    *,
    host: str,
    port: int,
    database_url: str | None,
    echo: Callable[[str], None] = print,
) -> int:
    """Run ``prefect server start`` in the foreground with the recording settings."""
    found = sitting.read_announcement()
    if found is not None and found.reusable and found.running():
        # This one replaces it in the announcement: commands use this server from now on (a
        # run still using the old one stops in one line; its trials are stored).
        sitting.stop_server(echo)
    env = server_env(database_url)
    database = _sqlite_database(env)
    # said here, so left for no later command to say again
    if database is not None and (line := set_aside_if_corrupt(database, leave_notice=False)):
        echo(line)
    # The UI's own API address defaults to port 4200; point it at the port we serve on.
    env.setdefault("PREFECT_UI_API_URL", f"http://{host}:{port}/api")
    cmd = [_script("prefect"), "server", "start", "--host", host, "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env)

    def stop(signum: int, _frame: object) -> None:
        proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    api = f"http://{host}:{port}/api"
    announced = False
    if wait_healthy(api, proc=proc):
        echo(f"Prefect server ready. UI: http://{host}:{port}/  (new UI: /v2/)")
        echo(f"In other shells: export PREFECT_API_URL={api}")
        # honesteval commands with the same PREFECT_HOME find it without PREFECT_API_URL.
        local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        write_server_file(f"http://{local}:{port}/api", os.getpid())
        announced = True
    try:
        return proc.wait()
    finally:
        if announced:
            remove_server_file(os.getpid())
        if proc.poll() is None:
            proc.kill()


def _sqlite_database(env: Mapping[str, str]) -> Path | None:
    """The SQLite file a ``prefect server start`` with ``env`` opens, when it is one the
    environment names or Prefect's default in ``PREFECT_HOME``; None for any other database."""
    prefix = "sqlite+aiosqlite:///"
    names = ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL")
    urls = [env[n] for n in names if env.get(n)]
    if not urls:
        home = env.get("PREFECT_HOME") or "~/.prefect"
        return Path(home).expanduser() / "prefect.db"
    return Path(urls[0][len(prefix) :]) if urls[0].startswith(prefix) else None


class LocalServer:
    """A throw-away ``honesteval server`` on a free loopback port (tests, bench, docs).

    ``env`` is the environment for clients (PREFECT_API_URL set); leaving the ``with`` block
    stops the server with SIGTERM and waits for its whole process group to be gone.
    """

    def __init__(self, prefect_home: Path, log: Path | None = None):
        self.port = free_port()
        self.ui_url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.ui_url}/api"
        base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        base.update(PREFECT_HOME=str(prefect_home), DO_NOT_TRACK="1")
        self.server_env = base
        self.env = {**base, "PREFECT_API_URL": self.api_url}
        args = [_script("honesteval"), "server", "--port", str(self.port)]
        out = log.open("wb") if log is not None else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            args, env=base, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def __enter__(self) -> LocalServer:
        if not wait_healthy(self.api_url, proc=self.proc):
            self.stop()
            raise RuntimeError(f"the Prefect server on port {self.port} did not come up")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout_s: float = 30) -> None:
        stop_group(self.proc, signal.SIGTERM, timeout_s)


def _script(name: str) -> str:
    """The console script ``name`` of this Python's environment, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


# -- the server process ------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Shut down when ``parent`` is gone: the kernel's parent-death signal where there is one,
    and a polling thread everywhere (it also covers a parent that died before ``prctl``)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)  # graceful first: uvicorn drains and exits
        time.sleep(_ORPHAN_GRACE_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="honesteval-parent-watch").start()


def _remember_when_up(api_url: str, home: Path, database: Path) -> None:
    """Once this server answers, its boot has migrated and registered: record that."""
    if wait_healthy(api_url):
        remember(home, database)


class UIOnDemand:
    """ASGI: a reusable server's UI, built at the first request outside ``/api``.

    Its boot is every sitting's first wait, so it builds no UI (the environment keeps
    ``PREFECT_UI_ENABLED`` off, as Prefect's own temporary server does); ``honesteval ui``
    opens it all the same: the first page asked for builds Prefect's UI app then
    (``create_ui_app``; its static files are copied once per install), and its ``ui-settings``
    point the pages at this server's API (``PREFECT_UI_API_URL``, set by the sitting).
    """

    def __init__(self, app: Any):
        self.app = app
        self._ui: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path == "/api" or path.startswith("/api/"):
            await self.app(scope, receive, send)
            return
        if self._ui is None:
            import anyio

            self._ui = await anyio.to_thread.run_sync(_ui_app)
        await self._ui(scope, receive, send)


def _ui_app() -> Any:
    """Prefect's UI app as ``prefect server start`` mounts it at ``/``: it serves the static
    bundles only when ``PREFECT_UI_ENABLED`` is on as it is built."""
    from prefect.server.api.server import create_ui_app
    from prefect.settings import PREFECT_UI_ENABLED, temporary_settings

    with temporary_settings(updates={PREFECT_UI_ENABLED: True}):
        return create_ui_app(ephemeral=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}")
    parser.add_argument("--parent", type=int, help="a temporary server: dies with this pid")
    parser.add_argument("--reusable", action="store_true", help="stops when idle instead")
    parser.add_argument("--idle-s", type=float, default=sitting.DEFAULT_IDLE_S)
    parser.add_argument("--max-mb", type=float, default=sitting.DEFAULT_MAX_MB)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--keep-runs", default="all", help="honesteval flow runs kept, or all")
    args = parser.parse_args(argv)
    if args.reusable == (args.parent is not None):
        parser.error("give exactly one of --parent and --reusable")
    life = None
    if args.reusable:
        try:  # one server per home: wait for a previous one still shutting down
            life = sitting.hold_life_lock()
        except HonestevalError as exc:
            sys.exit(f"honesteval: {exc}")
    else:
        _die_with_parent(args.parent)
    keep = None if args.keep_runs == "all" else int(args.keep_runs)
    home = prefect_home()
    database = default_database(home)  # imports Prefect's settings
    if database is not None and (line := set_aside_if_corrupt(database)):
        print(f"honesteval: {line}", file=sys.stderr)  # the CLI prints it (take_notice)
    skip = known_current(home, database)
    prune_temporary_home(database, keep)  # before serving: this server writes nothing yet
    if skip:
        print(SKIPPING, file=sys.stderr)
    elif database is not None:
        threading.Thread(
            target=_remember_when_up,
            args=(f"http://127.0.0.1:{args.port}/api", home, database),
            daemon=True,
            name="honesteval-schema",
        ).start()
    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import temporary_settings

    with temporary_settings(updates=skipped_settings() if skip else None):
        app: Any = create_app()  # the app ``prefect server start`` serves
        if args.reusable:
            activity = sitting.Activity()
            app = sitting.CountRequests(
                UIOnDemand(app),
                activity,
                on_ready=lambda: sitting.tend(
                    activity,
                    args.idle_s,
                    _ORPHAN_GRACE_S,
                    prune=lambda: prune_temporary_home(database, keep, live=True),
                    max_mb=args.max_mb,
                ),
            )
        try:
            uvicorn.run(
                app,
                host="127.0.0.1",
                port=args.port,
                log_level="error",
                lifespan="on",
            )
        finally:
            if args.reusable:
                remove_server_file(os.getpid())
    del life


if __name__ == "__main__":
    main()
