"""The CLI's Prefect server: reused when long-lived, never left running when temporary, and
skipped when an evaluation has nothing to run."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from honesteval.server import localserver
from tests.browser import page_text, runs_page_dom
from tests.helpers import popen_cli, run_cli

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table")


def _tagged_for(parent: int) -> list[int]:
    """Pids of live temporary servers started for ``parent`` (zombies do not count)."""
    pids = []
    for pid, owner in localserver._tagged_servers():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if owner == parent and state != "Z":
            pids.append(pid)
    return pids


def _env_without_api(prefect_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(prefect_home)
    return env


@pytest.mark.slow
def test_sigkill_of_the_cli_leaves_no_prefect_server(make_project, tmp_path):
    tasks = [{"id": f"k{i}", "input": {"behaviour": "pass", "sleep": 0.5}} for i in range(20)]
    root = make_project(tasks=tasks, config={"trials": 2})
    args = [sys.executable, "-m", "honesteval.cli", "evaluate", "--project", str(root)]
    args += ["--candidate", "base", "--max-concurrency", "1", "--json"]
    cli = subprocess.Popen(
        args,
        env=_env_without_api(tmp_path / "prefect"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    trial_dir = root / ".honesteval" / "trials"
    deadline = time.monotonic() + 180
    # Mid-run: its server is up and trials are being written.
    while time.monotonic() < deadline and cli.poll() is None:
        if _tagged_for(cli.pid) and trial_dir.is_dir() and any(trial_dir.rglob("trials.jsonl")):
            break
        time.sleep(0.1)
    assert cli.poll() is None, "the CLI finished before it could be killed"
    assert _tagged_for(cli.pid), "the CLI's temporary server was not found"
    cli.send_signal(signal.SIGKILL)  # the CLI alone: no chance to clean up
    cli.wait()
    deadline = time.monotonic() + 60
    while _tagged_for(cli.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _tagged_for(cli.pid) == []


def test_leftover_servers_of_dead_clis_are_reaped_and_live_ones_kept():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a CLI that has exited: its pid is free
    sleeper = "import time; time.sleep(120)"
    orphan = subprocess.Popen(
        [sys.executable, "-c", sleeper, localserver._MODULE, "--parent", str(gone.pid)],
        start_new_session=True,
    )
    owned = subprocess.Popen(
        [
            sys.executable,
            "-c",
            sleeper,
            "honesteval.server.localserver",
            "--parent",
            str(os.getpid()),
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while orphan.pid not in dict(localserver._tagged_servers()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        reaped = localserver.reap_orphans()
        assert orphan.pid in reaped and owned.pid not in reaped
        assert orphan.wait(30) == -signal.SIGKILL
        assert owned.poll() is None
    finally:
        for proc in (orphan, owned):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def health_server() -> Iterator[str]:
    """A loopback HTTP server answering ``/api/health`` like a Prefect server."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()
        server.server_close()


def test_a_running_honesteval_server_is_found_and_a_dead_one_is_not(
    health_server, tmp_path, monkeypatch
):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.delitem(sys.modules, "prefect.settings", raising=False)
    assert localserver.long_lived_api() is None
    localserver.write_server_file(health_server, os.getpid())
    assert localserver.long_lived_api() == (health_server, "honesteval server")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    localserver.write_server_file(health_server, gone.pid)  # its process has exited
    assert localserver.long_lived_api() is None
    localserver.remove_server_file(gone.pid)
    assert not (tmp_path / localserver.SERVER_FILE).exists()
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert localserver.long_lived_api() == ("http://127.0.0.1:9/api", "PREFECT_API_URL")


def test_a_temporary_server_runs_no_automations_unless_the_user_asks():
    user = {"PATH": "/bin", "PREFECT_API_URL": "http://127.0.0.1:9/api"}
    env = localserver.temporary_server_env(user)
    assert env["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] == "false"
    assert "PREFECT_API_URL" not in env  # the server is the API, it does not call one
    assert env["PATH"] == "/bin" and env["PREFECT_UI_ENABLED"] == "0"
    asked = localserver.temporary_server_env(
        {**user, "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "1"}
    )
    assert asked["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] == "1"
    # Prefect's legacy name too: the current name, read first, must not be added over it.
    legacy = localserver.temporary_server_env(
        {**user, "PREFECT_API_SERVICES_TRIGGERS_ENABLED": "1"}
    )
    assert legacy["PREFECT_API_SERVICES_TRIGGERS_ENABLED"] == "1"
    assert "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED" not in legacy
    # The recording settings are the server's own, whatever the CLI's environment says.
    batch = "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL"
    assert localserver.temporary_server_env({batch: "9"})[batch] != "9"


@pytest.mark.slow
def test_cli_says_which_server_and_a_rerun_with_all_trials_stored_needs_none(
    make_project, cli_env, tmp_path
):
    root = make_project(["pass", "fail", "graded"], config={"trials": 2})
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--json"]
    first = run_cli(*args, env=cli_env)
    assert first.returncode == 0, first.stderr
    url = cli_env["PREFECT_API_URL"]
    said = [x for x in first.stderr.splitlines() if " trials (" not in x]  # minus progress
    assert said == [f"using the Prefect server at {url} (PREFECT_API_URL)"]

    offline = _env_without_api(tmp_path / "prefect")
    again = run_cli(*args, env=offline)
    assert again.returncode == 0, again.stderr
    assert "no Prefect flow run" in again.stderr
    assert not (tmp_path / "prefect").exists()  # no server was started: nothing in its home
    one, two = json.loads(first.stdout), json.loads(again.stdout)
    assert two["trials_reused"] == 3 * 2
    for key in (
        "reward",
        "stderr",
        "ci95",
        "coverage",
        "n_scored",
        "trials_ok",
        "pass_hat_k",
        "per_task",
    ):
        assert two[key] == one[key]
    stored = sorted((root / ".honesteval" / "results").glob("val__base__*.json"))
    assert len(stored) == 2  # the rerun's result is stored like any other
    assert json.loads(stored[-1].read_text())["trials_reused"] == 6


def test_cheap_commands_do_not_import_prefect(make_project):
    root = make_project(["pass"])
    probe = (
        "import sys\nfrom honesteval.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('prefect' in sys.modules, 'scipy.stats' in sys.modules, file=sys.stderr)\n"
    )
    for args in (
        ["--help"],
        ["status", "--project", str(root)],
        ["evaluate", "--project", str(root), "--candidate", "nope"],
        ["evaluate", "--project", str(root / "missing")],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120
        )
        assert proc.stderr.strip().splitlines()[-1] == "False False", (args, proc.stderr)


@pytest.mark.parametrize("q", [0.5, 0.8, 0.95, 0.975, 0.999])
@pytest.mark.parametrize("df", [1, 2, 5, 30, 1000])
def test_quantiles_match_scipy_stats(q, df):
    from scipy import stats as sps

    from honesteval.stats import normal_quantile, t_quantile

    assert normal_quantile(q) == pytest.approx(sps.norm.ppf(q), rel=1e-12, abs=1e-12)
    assert t_quantile(q, df) == pytest.approx(sps.t.ppf(q, df), rel=1e-12, abs=1e-12)


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, from the process table."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _leader_with_child(leader_on_term: str, child_on_term: str) -> str:
    """A process-group leader and one child, each with its SIGTERM handler; the child prints
    its pid once both handlers are in place."""
    child = f"import os, signal, sys, time; {child_on_term}; print(os.getpid(), flush=True); "
    child += "time.sleep(120)"
    return (
        "import signal, subprocess, sys, time\n"
        f"{leader_on_term}\n"
        f"subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "time.sleep(120)\n"
    )


# A leader that ignores SIGTERM, with a child (in its group) that ignores it too.
_STUBBORN = _leader_with_child(
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
)


@pytest.mark.parametrize("strict", [True, False])
def test_stop_group_kills_a_group_that_ignores_its_signal(strict):
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUBBORN], stdout=subprocess.PIPE, start_new_session=True
    )
    child = int(proc.stdout.readline())
    assert sorted(_group_members(proc.pid)) == sorted([proc.pid, child])
    if strict:
        with pytest.raises(RuntimeError, match="ignored signal"):
            localserver.stop_group(proc, signal.SIGTERM, timeout_s=0.5)
    else:
        localserver.stop_group(proc, signal.SIGTERM, timeout_s=0.5, strict=False)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while _group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_members(proc.pid) == []
    proc.stdout.close()


def test_stop_group_waits_for_the_whole_group_of_an_obedient_process():
    # The leader exits at once on SIGTERM; its child takes a moment: stop_group returns
    # only when the child is gone too.
    script = _leader_with_child(
        "pass", "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.5), sys.exit(0)))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True
    )
    child = int(proc.stdout.readline())
    localserver.stop_group(proc, signal.SIGTERM, timeout_s=30)
    assert proc.returncode == -signal.SIGTERM
    assert child not in _group_members(proc.pid)
    proc.stdout.close()


# -- the reusable server of a sitting (issue 28) ------------------------------------------------
#
# Real servers in a PREFECT_HOME of each test's own, found in the process table (not through
# the code under test); no duration is asserted: a process is waited for with a generous
# deadline.

_GENEROUS_S = 180.0
_EVALUATE = [sys.executable, "-m", "honesteval.cli", "evaluate", "--project"]


def _reusable_servers(home: Path) -> list[int]:
    """Pids of live reusable servers whose PREFECT_HOME is ``home``."""
    marker = f"PREFECT_HOME={home}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if state in "ZX" or localserver._MODULE.encode() not in argv:
            continue
        if b"--reusable" in argv and marker in environ:
            found.append(int(entry.name))
    return found


def _wait_for(condition, what: str, timeout_s: float = _GENEROUS_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:g} s: {what}"
        time.sleep(0.1)


def _announced(home: Path) -> dict | None:
    try:
        return json.loads((home / localserver.SERVER_FILE).read_text())
    except (OSError, ValueError):
        return None


def _post(api_url: str, path: str) -> Any:
    """The server's JSON answer to an empty POST (Prefect's count and filter endpoints)."""
    request = urllib.request.Request(
        f"{api_url}/{path}", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def _recorder_interval_s(pid: int) -> float:
    """The task-run recorder's flush interval of the server ``pid``, as Prefect's settings
    read it from that process's environment (a subprocess: settings are read at import)."""
    environ = dict(
        item.split("=", 1)
        for item in (Path("/proc") / str(pid) / "environ").read_bytes().decode().split("\0")
        if "=" in item
    )
    read = "from prefect.settings import get_current_settings as s\n"
    read += "print(s().server.services.task_run_recorder.flush_interval)"
    out = subprocess.run(
        [sys.executable, "-c", read], env=environ, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def _flow_runs_recorded(api_url: str) -> int:
    return int(_post(api_url, "flow_runs/count"))


@pytest.fixture
def sitting(tmp_path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A PREFECT_HOME of its own and a CLI environment that reuses a server there (idle 10
    min unless a test says otherwise); every server of that home is gone at the end."""
    home = tmp_path / "prefect"
    env = _env_without_api(home)
    env.update(HONESTEVAL_SERVER_MODE="reuse", HONESTEVAL_SERVER_IDLE_S="600")
    yield home, env
    run_cli("server", "stop", env=env)
    for pid in _reusable_servers(home):  # what stop missed (the test fails below)
        os.killpg(pid, signal.SIGKILL)
    assert _reusable_servers(home) == []


def _evaluate(root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
def test_a_command_kept_waiting_by_the_servers_boot_says_so_once(make_project, sitting):
    """A reusable server that is slow to answer (here: it waits for the home's life lock,
    held by the test until the line appears, as a first boot in a new PREFECT_HOME waits for
    its database) is named in one line after 3 s; the command then runs as usual, and the
    next command, whose server answers at once, says nothing of it."""
    import fcntl

    from honesteval.orchestration.flow_runs import SLOW_SERVER
    from honesteval.server.sitting import LIFE_LOCK_FILE

    home, env = sitting
    root = make_project(["pass"], config={"trials": 1})
    home.mkdir(parents=True)
    lock = os.open(home / LIFE_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    proc = popen_cli("evaluate", "--project", str(root), "--candidate", "base", env=env)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        for line in proc.stderr:  # the server cannot answer before the lock is released
            lines.append(line)
            if SLOW_SERVER in line:
                break
    finally:
        os.close(lock)  # releases the lock: the server boots
    _, rest = proc.communicate(timeout=240)
    assert proc.returncode == 0, "".join(lines) + rest
    assert "".join(lines).count(SLOW_SERVER) == 1 and SLOW_SERVER not in rest
    again = _evaluate(root, env, "--fresh")
    assert SLOW_SERVER not in again.stderr


@pytest.mark.quick
@pytest.mark.slow
def test_the_first_command_starts_a_server_the_next_one_reuses_and_stop_stops_it(
    make_project, sitting
):
    home, env = sitting
    root = make_project(["pass", "fail"], config={"trials": 2})
    first = _evaluate(root, env)
    [pid] = _reusable_servers(home)
    url = _announced(home)["api_url"]
    assert _announced(home)["pid"] == pid
    assert f"starting a Prefect server at {url}" in first.stderr
    second = _evaluate(root, env, "--fresh")  # --fresh: a flow run, not a rerun from disk
    assert f"using the Prefect server at {url} (the reusable server" in second.stderr
    assert _reusable_servers(home) == [pid] and _announced(home)["pid"] == pid
    assert _flow_runs_recorded(url) == 2  # both commands' runs, in the one server
    # Its task-run recorder sleeps between flushes: Prefect's recorder truncates the interval
    # to whole seconds (0.4 s would be 0, a loop that never sleeps, a core busy all sitting).
    assert _recorder_interval_s(pid) >= 1 and _recorder_interval_s(pid).is_integer()

    # `honesteval ui` opens this server's UI, and it lists the sitting's runs
    ui = url.removesuffix("/api")
    opened = run_cli("ui", env={**env, "BROWSER": "true %s"})
    assert opened.returncode == 0 and opened.stdout.splitlines() == [f"{ui}/v2/runs"], opened
    texts = page_text(runs_page_dom(ui))
    assert texts.count("evaluate-base-val") == 2, "the two runs are not in the UI's runs list"

    stopped = run_cli("server", "stop", env=env)
    assert stopped.returncode == 0 and f"(pid {pid})" in stopped.stderr
    _wait_for(lambda: _reusable_servers(home) == [], "the stopped server exits")
    assert _announced(home) is None
    again = run_cli("server", "stop", env=env)
    assert again.returncode == 0 and "no honesteval Prefect server is running" in again.stderr


def _server_of_one_command_stops_by_itself(
    root: Path, home: Path, env: dict[str, str], why: str
) -> None:
    """One command starts a server; it exits by itself, withdrawn, saying ``why`` in its log."""
    _evaluate(root, env)
    [pid] = _reusable_servers(home)
    _wait_for(lambda: pid not in _reusable_servers(home), "the server exits by itself")
    assert _announced(home) is None
    assert why in (home / "honesteval-server.log").read_text()


@pytest.mark.slow
def test_a_server_stops_once_idle_and_the_next_command_starts_a_new_one(make_project, sitting):
    home, env = sitting
    env["HONESTEVAL_SERVER_IDLE_S"] = "3"
    root = make_project(["pass"], config={"trials": 2})
    _server_of_one_command_stops_by_itself(root, home, env, "idle for 3 s: stopping")
    later = _evaluate(root, env, "--fresh")
    assert "starting a Prefect server" in later.stderr
    assert len(_reusable_servers(home)) <= 1  # the new one (it may have gone idle already)


@pytest.mark.slow
def test_a_server_above_its_memory_limit_stops_once_no_command_uses_it(make_project, sitting):
    home, env = sitting
    env["HONESTEVAL_SERVER_MAX_MB"] = "1"  # every server is above it; idle stays 10 min
    root = make_project(["pass"], config={"trials": 2})
    _server_of_one_command_stops_by_itself(root, home, env, "> 1 MB while quiet: stopping")


@pytest.mark.slow
def test_a_server_whose_command_was_sigkilled_still_stops_once_idle(make_project, sitting):
    home, env = sitting
    env["HONESTEVAL_SERVER_IDLE_S"] = "3"
    tasks = [{"id": f"k{i}", "input": {"behaviour": "pass", "sleep": 0.5}} for i in range(20)]
    root = make_project(tasks=tasks, config={"trials": 2})
    cli = subprocess.Popen(
        [*_EVALUATE, str(root), "--candidate", "base", "--max-concurrency", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    trial_dir = root / ".honesteval" / "trials"
    _wait_for(
        lambda: (
            cli.poll() is not None
            or (len(_reusable_servers(home)) == 1 and any(trial_dir.rglob("trials.jsonl")))
        ),
        "the run is under way",
    )
    assert cli.poll() is None, "the CLI finished before it could be killed"
    assert len(_reusable_servers(home)) == 1
    cli.kill()  # SIGKILL: no chance to clean up
    cli.wait()
    _wait_for(lambda: _reusable_servers(home) == [], "the server of the killed command exits")
    assert _announced(home) is None


@pytest.mark.slow
def test_a_sigkilled_server_is_replaced_by_the_next_command(make_project, sitting):
    home, env = sitting
    root = make_project(["pass"], config={"trials": 2})
    _evaluate(root, env)
    [killed] = _reusable_servers(home)
    os.killpg(killed, signal.SIGKILL)
    _wait_for(lambda: _reusable_servers(home) == [], "the killed server is gone")
    assert _announced(home)["pid"] == killed  # stale: nobody withdrew it
    after = _evaluate(root, env, "--fresh")
    [new] = _reusable_servers(home)
    assert new != killed and _announced(home)["pid"] == new
    assert f"starting a Prefect server at {_announced(home)['api_url']}" in after.stderr


@pytest.mark.slow
def test_two_first_commands_at_once_share_one_server(make_project, sitting):
    home, env = sitting
    roots = [make_project(["pass"], config={"trials": 2}) for _ in range(2)]
    procs = [
        subprocess.Popen(
            [*_EVALUATE, str(root), "--candidate", "base"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for root in roots
    ]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert _reusable_servers(home) == [_announced(home)["pid"]]
    url = _announced(home)["api_url"]
    assert sum(f"starting a Prefect server at {url}" in e for e in errs) == 1, errs
    assert sum(f"using the Prefect server at {url}" in e for e in errs) == 1, errs
    assert _flow_runs_recorded(url) == 2


def test_server_settings_are_checked(monkeypatch):
    from honesteval.errors import ConfigError
    from honesteval.server import sitting as settings

    for var in (settings.MODE_VAR, settings.IDLE_VAR, settings.MAX_MB_VAR):
        monkeypatch.delenv(var, raising=False)
    assert settings.server_mode() == "reuse"
    assert settings.server_settings() == (600.0, 500.0)  # 10 minutes, 500 MB
    monkeypatch.setenv(settings.MODE_VAR, "Per-Command")
    monkeypatch.setenv(settings.IDLE_VAR, "2.5")
    monkeypatch.setenv(settings.MAX_MB_VAR, "300")
    assert settings.server_mode() == "per-command"
    assert settings.server_settings() == (2.5, 300.0)
    monkeypatch.setenv(settings.MODE_VAR, "sometimes")
    with pytest.raises(ConfigError, match=settings.MODE_VAR):
        settings.server_mode()
    for var in (settings.IDLE_VAR, settings.MAX_MB_VAR):
        for bad in ("0", "-1", "ten", "inf", "nan"):
            monkeypatch.setenv(var, bad)
            with pytest.raises(ConfigError, match=var):
                settings.server_settings()
        monkeypatch.setenv(var, "1")


def test_a_bad_server_setting_is_one_line_before_anything_starts(make_project, tmp_path):
    root = make_project(["pass"])
    env = _env_without_api(tmp_path / "prefect")
    env.update(HONESTEVAL_SERVER_MODE="reuse", HONESTEVAL_SERVER_IDLE_S="soon")
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: HONESTEVAL_SERVER_IDLE_S must be a number of seconds > 0, got 'soon'"
    ]
    assert not (tmp_path / "prefect" / localserver.SERVER_FILE).exists()


@pytest.mark.slow
def test_ctrl_c_ends_the_run_cancelled_and_leaves_only_the_server_for_the_next_command(
    sitting, tmp_path
):
    from tests.interruption_harness import Cli, make_project, wait_for_calls, wait_gone

    home, env = sitting
    env["STOPPABLE_SLEEP_S"] = "1.0"
    # (named so that no other path of the test starts with the project's)
    root = make_project(tmp_path / "project", n_tasks=8, trials=3, kind="python")
    args = ["evaluate", "--project", str(root), "--candidate", "c1"]
    cli = Cli(args, env, pty_=True)
    wait_for_calls(root, 8, cli)
    cli.ctrl_c()
    assert cli.wait(120) == 130, cli.text()[-2000:]
    assert wait_gone(str(root), 30.0) == []  # no target, nothing of the command's own
    [pid] = _reusable_servers(home)
    url = _announced(home)["api_url"]
    assert [run["state_type"] for run in _post(url, "flow_runs/filter")] == ["CANCELLED"]
    resumed = run_cli(*args, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"using the Prefect server at {url}" in resumed.stderr
    assert _reusable_servers(home) == [pid]


# -- a corrupt Prefect database (issue 36) -------------------------------------------------------


def _corrupt_copy(migrated: Path, home: Path, how: str) -> bytes:
    """A real Prefect database in ``home``, cut to half its size or with its second page
    scribbled over; its bytes as left."""
    home.mkdir(parents=True, exist_ok=True)
    data = bytearray(migrated.read_bytes())
    if how == "truncated":
        data = data[: len(data) // 2]
    else:
        data[4096:8192] = bytes((i * 37 + 11) % 256 for i in range(4096))
    (home / "prefect.db").write_bytes(bytes(data))
    return bytes(data)


def _set_aside(home: Path, corrupt: bytes) -> None:
    """The corrupt file is kept, byte for byte, under a timestamped name; a fresh one is used."""
    companions = ("-wal", "-shm", "-journal")  # set aside beside it, under the same stamp
    [aside] = [p for p in home.glob("prefect.db.corrupt-*") if not p.name.endswith(companions)]
    assert aside.read_bytes() == corrupt
    assert (home / "prefect.db").is_file() and (home / "prefect.db").read_bytes() != corrupt


@pytest.mark.slow
def test_a_truncated_database_is_set_aside_and_the_sitting_goes_on(
    make_project, sitting, migrated_prefect_db
):
    home, env = sitting
    corrupt = _corrupt_copy(migrated_prefect_db, home, "truncated")
    root = make_project(["pass", "fail"], config={"trials": 2})
    first = _evaluate(root, env)  # exit 0, not "did not answer within 60 s"
    said = [line for line in first.stderr.splitlines() if "was corrupt" in line]
    assert len(said) == 1 and "set aside as prefect.db.corrupt-" in said[0], first.stderr
    assert "did not answer" not in first.stderr
    _set_aside(home, corrupt)
    second = _evaluate(root, env, "--fresh")  # the same server, said once only
    assert "was corrupt" not in second.stderr


@pytest.mark.slow
def test_honesteval_server_sets_a_scribbled_database_aside(tmp_path, migrated_prefect_db):
    home = tmp_path / "prefect"
    corrupt = _corrupt_copy(migrated_prefect_db, home, "scribbled")
    log = tmp_path / "server.log"
    with localserver.LocalServer(home, log=log) as server:
        assert localserver.healthy(server.api_url)
    said = [line for line in log.read_text().splitlines() if "was corrupt" in line]
    assert len(said) == 1 and "set aside as prefect.db.corrupt-" in said[0]
    _set_aside(home, corrupt)
