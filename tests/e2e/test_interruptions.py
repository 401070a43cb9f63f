"""Stopped at any moment (Ctrl-C, SIGTERM, SIGKILL), a project is never wedged: the next run
finishes it, paying for no target twice.

The signal cells start the real CLI in a subprocess; Ctrl-C goes through a pseudo-terminal
(``pty.fork()``, then ``\\x03`` to the master), as a user types it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.helpers import ProjectFactory, call_counts, run_cli, stored_trials
from tests.interruption_harness import (
    LINE,
    Cli,
    left_running,
    make_project,
    paid_calls,
    wait_for_calls,
    wait_for_starts,
    wait_gone,
)

pytestmark = pytest.mark.slow


def _awaiting_score_everywhere(root, candidate: str = "base", **plan_kw) -> int:
    """Run every planned target and store its rollout, grading none: the state a run stopped
    between its targets and its scorer leaves (the last line per trial is the rollout
    awaiting its score). Returns how many trials that is."""
    from honesteval.evaluation.plan import adapter_for, plan_evaluation
    from honesteval.evaluation.trial import run_target_with_retries

    plan = plan_evaluation(root, candidate, "val", **plan_kw)
    adapter = adapter_for(str(root))
    for spec in plan.todo:
        run_target_with_retries(adapter, spec, plan.settings)
    return len(plan.todo)


def test_rollouts_awaiting_their_score_are_graded_by_the_next_run(tmp_path):
    from honesteval.evaluation.trial import AWAITING_SCORE

    behaviours = ["pass", "fail", "pass", "pass", "fail"]
    root = ProjectFactory(tmp_path)(behaviours, config={"trials": 2})
    n = _awaiting_score_everywhere(root)
    assert n == 10
    stored = stored_trials(root)
    assert len(stored) == 10 and all(r["error"] == AWAITING_SCORE for r in stored)

    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    # 3 passing tasks of 5, both trials each: 0.6; every trial graded, none run again.
    assert result["reward"] == pytest.approx(3 / 5)
    assert result["trials_ok"] == 10
    assert (result["trials_reused"], result["trials_graded"], result["trials_ran"]) == (0, 10, 0)
    assert set(call_counts(root).values()) == {1} and len(call_counts(root)) == 10
    assert "10 graded from stored rollouts" in proc.stderr
    assert all(r["status"] == "ok" for r in stored_trials(root))

    again = run_cli("evaluate", "--project", str(root), "--candidate", "base", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reward"] == pytest.approx(3 / 5)
    assert json.loads(again.stdout)["trials_reused"] == 10
    assert set(call_counts(root).values()) == {1}


def test_counts_say_what_was_reused_graded_and_run(tmp_path, cli_env):
    """Through the flow (a server up): 2 trials on disk, 4 stored rollouts awaiting their
    score, 2 never run."""
    from tests.helpers import run_plain

    root = ProjectFactory(tmp_path)(["pass", "fail", "pass", "pass"], config={"trials": 2})
    assert _awaiting_score_everywhere(root, task_ids=["t00", "t01"]) == 4
    run_plain(root, task_ids=["t02"])
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", "-v", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "2 reused from disk, 4 graded from stored rollouts, 2 ran" in proc.stdout
    assert sorted(call_counts(root).values()) == [1] * 8


# -- an internal error: one line, the traceback in a file ---------------------------------------

_INJECTED = """
import sys
import honesteval.views.status

def broken(*args, **kwargs):
    raise KeyError(("q56", 0))

honesteval.views.status.project_status = broken
from honesteval.cli import command
sys.argv = ["honesteval", *sys.argv[1:]]
command()
"""


def test_an_internal_error_is_one_line_and_its_traceback_a_file(tmp_path):
    import subprocess
    import sys

    root = ProjectFactory(tmp_path)(["pass"])
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-c", _INJECTED, "status", "--project", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: internal error in `honesteval status`: KeyError: ")
    assert "('q56', 0)" in lines[0] and "Traceback" not in proc.stderr and proc.stdout == ""
    saved = list((root / ".honesteval" / "errors").glob("*.txt"))
    assert len(saved) == 1 and str(saved[0]) in lines[0]
    text = saved[0].read_text()
    assert "Traceback (most recent call last)" in text
    assert "in broken" in text and "KeyError: ('q56', 0)" in text
    assert saved[0].stat().st_mode & 0o077 == 0  # private, as every state file
    # Nothing else in the project changed.
    after = sorted(p.relative_to(root) for p in root.rglob("*") if "errors" not in p.parts)
    assert [p for p in after if p not in before] in ([], [Path(".honesteval")])


# -- the interruption suite: real signals, real processes ---------------------------------------

#: Seconds from the signal to the CLI's exit that the suite accepts. The goal is 5 s (2 s
#: targets); measured 1.4-4.4 s on 2 cores at load 14. The bound is generous so a loaded CI
#: machine does not fail it; a regression to the old behaviour (68-78 s) fails it.
BUDGET_S = 20.0


def _env(tmp_path: Path, *, sleep_s: float = 0.0, score_sleep_s: float = 0.0, home=None):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    if home is not None:
        env["PREFECT_HOME"] = str(home)
    env["STOPPABLE_SLEEP_S"] = str(sleep_s)
    env["STOPPABLE_SCORE_SLEEP_S"] = str(score_sleep_s)
    return env


def _on(env: dict[str, str], api_url: str) -> dict[str, str]:
    """``env`` for a command that only has to finish the work exactly (a resume, a baseline):
    on the session's server, not a temporary server booted for it. The command that is
    stopped keeps the user's path."""
    return {**env, "PREFECT_API_URL": api_url}


def _stop(cli: Cli, how: str) -> float:
    """Send the stop; seconds until the CLI exited."""
    t0 = time.monotonic()
    if how == "ctrl-c":
        cli.ctrl_c()
    else:
        cli.signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
    cli.wait(120)
    return time.monotonic() - t0


def _kept_on_disk(root: Path) -> int:
    """Trials the next run pays no target for, read from the trial logs: results that count,
    and rollouts awaiting their score."""
    from honesteval.evaluation.trial import AWAITING_SCORE

    return sum(
        r["status"] in ("ok", "failed") or r.get("error") == AWAITING_SCORE
        for r in stored_trials(root)
    )


def _assert_stopped(
    cli: Cli, seconds: float, root: Path, planned: int | None, before: int = 0
) -> int:
    """Exit 130 within the budget, one `interrupted:` line with the true counts (``before``:
    trials on disk from earlier stages, not this one's), nothing else on the terminal that
    looks like trouble, no process left; returns what was kept."""
    text = cli.text()
    assert cli.code == 130, text[-3000:]
    assert seconds < BUDGET_S, (seconds, text[-3000:])
    found = LINE.findall(text)
    assert len(found) == 1, text[-3000:]
    kept, of = map(int, found[0])
    assert kept == _kept_on_disk(root) - before, (found, _kept_on_disk(root))
    assert of == planned if planned is not None else kept <= of
    for trouble in ("Traceback", "Error logging to API", "ERROR", "Still processing items"):
        assert trouble not in text, text[-3000:]
    assert wait_gone(str(root), 5.0) == []
    return kept


def _resume(
    root: Path, env: dict, planned: int, kept: int, reward: float, *, lost: bool = False
) -> None:
    """The same command again (targets quick now): exit 0, exact numbers, every target paid
    for exactly once over both runs (``lost``: rollouts that could not be stored ran again;
    those kept still ran once, the others at most twice)."""
    from honesteval.evaluation.trial import AWAITING_SCORE

    kept_keys = {
        ("c1", r["task_id"], r["seed"])
        for r in stored_trials(root)
        if r["status"] in ("ok", "failed") or r.get("error") == AWAITING_SCORE
    }
    env = {**env, "STOPPABLE_SLEEP_S": "0", "STOPPABLE_SCORE_SLEEP_S": "0"}
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "c1", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["trials_ok"] == planned and result["reward"] == pytest.approx(reward)
    assert result["trials_reused"] + result["trials_graded"] == kept
    assert result["trials_ran"] == planned - kept
    paid = paid_calls(root)
    assert len(paid) == planned, paid.most_common(3)
    if lost:
        assert all(paid[key] == 1 for key in kept_keys) and max(paid.values()) <= 2
    else:
        assert set(paid.values()) == {1}, paid.most_common(3)


def _start(root: Path, env: dict, how: str, *args: str) -> Cli:
    return Cli([*args, "--project", str(root)], env, pty_=how == "ctrl-c")


@pytest.mark.parametrize(
    ("how", "kind", "n_tasks", "trials"),
    [
        ("ctrl-c", "command", 22, 3),  # 66 trials: batched
        ("sigterm", "python", 22, 3),  # batched, targets in threads
        ("sigterm", "command", 8, 3),  # 24 trials: one task run per trial
        ("ctrl-c", "python", 8, 3),
    ],
)
def test_a_stopped_evaluate_keeps_what_was_paid_for(
    tmp_path, prefect_backend, how, kind, n_tasks, trials
):
    sleep_s = 1.0
    root = make_project(tmp_path / "p", n_tasks=n_tasks, trials=trials, kind=kind)
    env = _env(tmp_path, sleep_s=sleep_s)
    cli = _start(root, env, how, "evaluate", "--candidate", "c1")
    wait_for_calls(root, 8, cli)
    time.sleep(sleep_s / 2)  # mid-target, as a user's stop comes
    seconds = _stop(cli, how)
    planned = n_tasks * trials
    kept = _assert_stopped(cli, seconds, root, planned)
    assert 8 <= kept < planned
    _resume(root, _on(env, prefect_backend), planned, kept, 1.0)


@pytest.mark.parametrize("kind", ["command", "isolated"])
def test_ctrl_c_stops_target_processes_at_once(tmp_path, prefect_backend, kind):
    """Targets that would run 60 s: Ctrl-C stops their processes, nothing is kept of them."""
    root = make_project(tmp_path / "p", n_tasks=8, trials=1, kind=kind)
    env = _env(tmp_path, sleep_s=60.0)
    cli = _start(root, env, "ctrl-c", "evaluate", "--candidate", "c1")
    deadline = time.monotonic() + 120
    while len(left_running(str(root))) < 1 + 8:  # the CLI and 8 targets (max_concurrency)
        assert time.monotonic() < deadline, cli.text()[-2000:]
        time.sleep(0.1)
    time.sleep(1.0)
    seconds = _stop(cli, "ctrl-c")
    assert _assert_stopped(cli, seconds, root, 8) == 0
    assert paid_calls(root) == {}
    _resume(root, _on(env, prefect_backend), 8, 0, 1.0)


def test_sigkill_takes_target_processes_along(tmp_path, prefect_backend):
    """Command targets that would run 60 s die with a SIGKILLed CLI (parent-death signal),
    within moments, not at their end."""
    root = make_project(tmp_path / "p", n_tasks=8, trials=1, kind="command")
    env = _env(tmp_path, sleep_s=60.0)
    cli = _start(root, env, "sigkill", "evaluate", "--candidate", "c1")
    wait_for_starts(root, 8, cli)
    _stop(cli, "sigkill")
    assert cli.code == -9
    assert wait_gone(str(root), 5.0) == []
    _resume(root, _on(env, prefect_backend), 8, 0, 1.0)


def test_sigkill_mid_batch_then_the_next_run_is_exact(tmp_path, prefect_backend):
    """Killed mid-batch (python targets): each trial stored is kept and never paid again.
    A SIGKILL between a target's end and its record (milliseconds; more on a loaded machine)
    loses that rollout, which runs again: nothing in a killed process can prevent that, so a
    target in flight at the kill may be paid twice, never one that was stored."""
    root = make_project(tmp_path / "p", n_tasks=22, trials=3, kind="python")
    sleep_s = 1.0
    env = _env(tmp_path, sleep_s=sleep_s)
    cli = _start(root, env, "sigkill", "evaluate", "--candidate", "c1")
    wait_for_calls(root, 8, cli)
    time.sleep(sleep_s / 2)
    _stop(cli, "sigkill")
    assert cli.code == -9
    assert wait_gone(str(root), 5.0) == []
    _resume(root, _on(env, prefect_backend), 66, _kept_on_disk(root), 1.0, lost=True)


def test_stopped_while_grading_the_next_run_grades_without_running_targets(
    tmp_path, prefect_backend
):
    """All 66 targets ran, their scorer is slow (an LLM judge): Ctrl-C mid-grading keeps every
    rollout; the next run grades them and calls no target (issue 25 §1 through a signal)."""
    root = make_project(tmp_path / "p", n_tasks=22, trials=3, kind="python")
    env = _env(tmp_path, score_sleep_s=3.0)
    cli = _start(root, env, "ctrl-c", "evaluate", "--candidate", "c1")
    wait_for_calls(root, 66, cli)
    time.sleep(1.0)
    seconds = _stop(cli, "ctrl-c")
    assert _assert_stopped(cli, seconds, root, 66) == 66
    _resume(root, _on(env, prefect_backend), 66, 66, 1.0)


@pytest.mark.quick
def test_a_second_ctrl_c_exits_at_once(tmp_path):
    root = make_project(tmp_path / "p", n_tasks=8, trials=1, kind="python")
    env = _env(tmp_path, sleep_s=60.0)
    cli = _start(root, env, "ctrl-c", "evaluate", "--candidate", "c1")
    wait_for_starts(root, 8, cli)
    cli.ctrl_c()
    time.sleep(0.3)
    seconds = _stop(cli, "ctrl-c")
    assert cli.code == 130 and "interrupted again: stopped at once" in cli.text()
    assert seconds < BUDGET_S / 2, seconds
    assert wait_gone(str(root), 5.0) == []


@pytest.mark.parametrize(("how", "stage"), [("ctrl-c", "screen"), ("sigterm", "confirmation")])
def test_a_stopped_gate_keeps_its_trials_and_the_next_gate_decides(
    tmp_path, prefect_backend, how, stage
):
    """c2 passes every task, the current best c1 half: the gate screens (c2's 12 trials; c1's
    are on disk), then confirms on fresh seeds (both, several trials per task)."""
    root = make_project(
        tmp_path / "p",
        n_tasks=12,
        trials=1,
        kind="python",
        passes={"c1": list(range(6)), "c2": list(range(12))},
    )
    on_session = _on(_env(tmp_path), prefect_backend)
    baseline = run_cli("gate", "--project", str(root), "--candidate", "c1", env=on_session)
    assert baseline.returncode == 0, baseline.stderr
    sleep_s = 0.5
    env = _env(tmp_path, sleep_s=sleep_s)
    cli = _start(root, env, how, "gate", "--candidate", "c2")
    screen = stage == "screen"
    wait_for_calls(root, 12 + (4 if screen else 12 + 8), cli)
    time.sleep(sleep_s / 2)
    seconds = _stop(cli, how)
    if screen:
        _assert_stopped(cli, seconds, root, 24)
    else:
        _assert_stopped(cli, seconds, root, None, before=24)
    again = run_cli("gate", "--project", str(root), "--candidate", "c2", "-v", env=on_session)
    # A decision (accepted or not: the confirmation's test decides), made on every trial.
    assert again.returncode in (0, 1), again.stderr
    assert "confirmation #1 on fresh seeds" in again.stdout, again.stdout
    paid = paid_calls(root)
    assert len(paid) > 12 + 12 and set(paid.values()) == {1}, paid.most_common(3)
    lines = (root / ".honesteval" / "decisions.jsonl").read_text().splitlines()
    decisions = [d for d in map(json.loads, lines) if d.get("kind") == "decision"]
    assert len(decisions) == 2  # the baseline's and this one: none from the stopped gate


def _flow_run_states(api_url: str) -> list[str]:
    import urllib.request

    request = urllib.request.Request(
        f"{api_url}/flow_runs/filter",
        data=json.dumps({"sort": "START_TIME_ASC"}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return [run["state_type"] for run in json.loads(reply.read())]


def test_with_a_server_up_no_stopped_run_stays_running(tmp_path, seed_prefect_home):
    """`honesteval server` up (found through its announcement, no PREFECT_API_URL): a run
    stopped by Ctrl-C ends Cancelled; one killed by SIGKILL is marked Crashed by the next
    command, which finishes the evaluation exactly."""
    from honesteval.server.localserver import LocalServer

    home = seed_prefect_home(tmp_path / "home")  # its server's boot is not a first one
    root = make_project(tmp_path / "p", n_tasks=8, trials=3, kind="python")
    with LocalServer(home) as server:  # not given the project: no marker in its command line
        env = _env(tmp_path, sleep_s=1.0, home=home)
        cli = _start(root, env, "ctrl-c", "evaluate", "--candidate", "c1")
        wait_for_calls(root, 8, cli)
        time.sleep(0.5)
        seconds = _stop(cli, "ctrl-c")
        _assert_stopped(cli, seconds, root, 24)
        assert "using the Prefect server at" in cli.text()
        assert _flow_run_states(server.api_url) == ["CANCELLED"]

        started = len((root / "started.log").read_text().splitlines())
        (root / "hold").touch()  # its targets wait: the kill comes mid-run, whatever the load
        killed = _start(root, env, "sigkill", "evaluate", "--candidate", "c1")
        wait_for_starts(root, started + 1, killed)
        _stop(killed, "sigkill")
        (root / "hold").unlink()
        assert wait_gone(str(root), 5.0) == []
        assert _flow_run_states(server.api_url) == ["CANCELLED", "RUNNING"]
        _resume(root, env, 24, _kept_on_disk(root), 1.0, lost=True)  # SIGKILL: see below
        assert _flow_run_states(server.api_url) == ["CANCELLED", "CRASHED", "COMPLETED"]


def test_a_disk_full_mid_run_is_one_line_at_once(tmp_path, prefect_backend):
    """The state folder's disk fills while targets run: the run stops as a Ctrl-C would
    (every later trial would be paid for and lost), one `error:` line, exit 2; every record
    on disk is intact."""
    from tests.e2e.test_faults import fill, small_tmpfs

    with small_tmpfs(tmp_path / "disk") as disk:
        root = make_project(tmp_path / "p", n_tasks=22, trials=3, kind="python")
        (disk / "state").mkdir()
        (root / ".honesteval").symlink_to(disk / "state", target_is_directory=True)
        env = _env(tmp_path, sleep_s=0.5)
        cli = _start(root, env, "ctrl-c", "evaluate", "--candidate", "c1")
        wait_for_calls(root, 8, cli)
        filler = fill(disk)
        t0 = time.monotonic()
        cli.wait(120)
        seconds = time.monotonic() - t0
        text = cli.text()
        assert cli.code == 2, text[-3000:]
        assert seconds < BUDGET_S, seconds
        errors = [line for line in text.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "No space left on device" in errors[0], text[-3000:]
        for trouble in ("Traceback", "ERROR", "Error logging to API", "interrupted"):
            assert trouble not in text, text[-3000:]
        assert wait_gone(str(root), 5.0) == []
        kept = _kept_on_disk(root)
        filler.unlink()
        # Rollouts the full disk could not take are lost (and run again): nothing else is.
        _resume(root, _on(env, prefect_backend), 66, kept, 1.0, lost=True)


def test_losing_the_server_mid_run_ends_the_run_in_one_line(tmp_path, seed_prefect_home):
    """`honesteval server` stopped while an evaluate runs against it: the CLI ends within
    seconds with one line (exit 2), leaves no target running, and the next run (on a
    temporary server) finishes exactly what was left."""
    from honesteval.server.localserver import LocalServer

    home = seed_prefect_home(tmp_path / "home")  # its server's boot is not a first one
    root = make_project(tmp_path / "p", n_tasks=8, trials=3, kind="command")
    env = _env(tmp_path, sleep_s=1.0, home=home)
    with LocalServer(home) as server:
        cli = _start(root, env, "ctrl-c", "evaluate", "--candidate", "c1")
        wait_for_calls(root, 8, cli)
        server.stop()
        t0 = time.monotonic()
        cli.wait(120)
    seconds = time.monotonic() - t0
    text = cli.text()
    assert cli.code == 2, text[-3000:]
    assert seconds < BUDGET_S, seconds
    lines = [line for line in text.splitlines() if "error:" in line]
    assert len(lines) == 1 and "is gone (connection refused)" in lines[0], text[-3000:]
    assert "Traceback" not in text
    assert wait_gone(str(root), 5.0) == []
    _resume(root, env, 24, _kept_on_disk(root), 1.0)


def test_two_evaluates_of_one_candidate_at_once_pay_once(tmp_path, prefect_backend):
    """The second waits for the first, then reuses its trials: 24 trials, 24 target calls,
    and both print the same result."""
    root = make_project(tmp_path / "p", n_tasks=8, trials=3, kind="python")
    env = _on(_env(tmp_path), prefect_backend)
    args = ["evaluate", "--candidate", "c1", "--json"]
    hold = root / "hold"  # the targets wait while it exists
    hold.touch()
    first = Cli([*args, "--project", str(root)], env, pty_=False)
    wait_for_starts(root, 8, first)
    second = Cli([*args, "--project", str(root)], env, pty_=False)
    deadline = time.monotonic() + 120
    while "waiting for another evaluate of c1 on val" not in second.text():
        assert time.monotonic() < deadline, second.text()[-2000:]
        time.sleep(0.1)
    hold.unlink()
    assert first.wait(300) == 0 and second.wait(300) == 0, second.text()[-2000:]
    paid = paid_calls(root)
    assert len(paid) == 24 and set(paid.values()) == {1}, paid.most_common(3)
    results = [json.loads(c.text()[c.text().index("{") :]) for c in (first, second)]
    assert [r["reward"] for r in results] == [1.0, 1.0]
    assert results[1]["trials_reused"] == 24


# -- `honesteval serve`: a deployment's flow run stopped with serve ------------------------------

#: What serve says when a stop ended its runs in flight (one run here).
SERVE_LINE = re.compile(
    r"interrupted: serve stopped (\S+) (\w+)(?: \((\d+) of (\d+) trials kept\))?;"
    r" run it again to resume"
)


def _api(api_url: str, method: str, path: str, body: dict | None = None) -> object:
    """One call to the Prefect API; a busy SQLite server answers 503 for a moment: ask again."""
    import httpx

    deadline = time.monotonic() + 60
    while True:
        try:
            reply = httpx.request(method, f"{api_url}{path}", json=body, timeout=30)
            if reply.status_code != 503:
                reply.raise_for_status()
                return reply.json()
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{method} {path}: the server kept failing"
        time.sleep(0.5)


_TEMPORARY = re.compile(r"using a temporary Prefect server at (\S+):")


def _serve_a_run(root: Path, env: dict, how: str, api_url: str | None) -> tuple[Cli, str]:
    """`honesteval serve` (under a terminal for Ctrl-C), then a run of evaluate/val for c1
    created through the API as `prefect deployment run` does; the CLI and the run's id.
    ``api_url`` None: the temporary server serve names."""
    cli = _start(root, env, how, "serve")
    deadline = time.monotonic() + 180
    while api_url is None:
        found = _TEMPORARY.search(cli.text())
        api_url = found.group(1) if found else None
        assert time.monotonic() < deadline, cli.text()[-2000:]
        time.sleep(0.2)
    # serve registers its deployments in order, nightly last
    while "nightly" not in {d["name"] for d in _api(api_url, "POST", "/deployments/filter", {})}:
        assert time.monotonic() < deadline, cli.text()[-2000:]
        time.sleep(0.5)
    deployment = _api(api_url, "GET", "/deployments/name/evaluate/val")
    run = _api(
        api_url,
        "POST",
        f"/deployments/{deployment['id']}/create_flow_run",
        {"parameters": {"candidate": "c1"}},
    )
    return cli, run["id"]


def _runs_named(api_url: str, name: str) -> list[tuple[str, str]]:
    """(state type, state message) of the flow runs called ``name``, oldest first."""
    body = {"flow_runs": {"name": {"any_": [name]}}, "sort": "START_TIME_ASC"}
    runs = _api(api_url, "POST", "/flow_runs/filter", body)
    return [(r["state"]["type"], r["state"]["message"]) for r in runs]


def _serve_env(tmp_path: Path, home: Path, api_url: str, **pace: float) -> dict:
    """The environment of a user who exported PREFECT_API_URL (as the README says); the
    runner polls every second, so a run starts at once."""
    env = _env(tmp_path, home=home, **pace)
    return {**env, "PREFECT_API_URL": api_url, "PREFECT_RUNNER_POLL_FREQUENCY": "1"}


@pytest.mark.parametrize(("how", "kind"), [("ctrl-c", "command"), ("sigterm", "python")])
def test_a_stopped_serve_ends_its_run_and_keeps_what_was_paid_for(
    tmp_path, seed_prefect_home, how, kind
):
    """A deployment's flow run mid-run under `honesteval serve`, a real server up: serve asks
    the run to stop once; the run stops its targets, keeps its trials and ends Cancelled;
    serve says so in one line and exits 130; no process is left; the next run pays each
    trial once."""
    from honesteval.server.localserver import LocalServer

    home = seed_prefect_home(tmp_path / "home")  # its server's boot is not a first one
    root = make_project(tmp_path / "p", n_tasks=8, trials=3, kind=kind)
    with LocalServer(home) as server:
        env = _serve_env(tmp_path, home, server.api_url, sleep_s=1.0)
        cli, run_id = _serve_a_run(root, env, how, server.api_url)
        wait_for_calls(root, 8, cli)
        assert left_running(run_id) != []  # the run's own process, found by its id
        time.sleep(0.5)  # mid-target
        seconds = _stop(cli, how)
        text = cli.text()
        assert cli.code == 130, text[-3000:]
        assert seconds < BUDGET_S, (seconds, text[-3000:])
        kept = _kept_on_disk(root)
        assert 8 <= kept < 24
        assert SERVE_LINE.findall(text) == [("evaluate-c1-val", "Cancelled", str(kept), "24")]
        for trouble in ("Traceback", "ERROR", "Error logging to API", "Crashed"):
            assert trouble not in text, text[-3000:]
        assert wait_gone(str(root), 5.0) == [] and wait_gone(run_id, 5.0) == []
        line = f"interrupted: {kept} of 24 trials kept; run the same command to resume"
        assert _runs_named(server.api_url, "evaluate-c1-val") == [("CANCELLED", line)]
        _resume(root, env, 24, kept, 1.0)
        states = [state for state, _ in _runs_named(server.api_url, "evaluate-c1-val")]
        assert states == ["CANCELLED", "COMPLETED"]


def test_a_second_ctrl_c_stops_serve_at_once_and_no_run_stays_running(tmp_path, seed_prefect_home):
    """Targets held: the first Ctrl-C asks the run to stop, the second kills its process at
    once; serve marks the run Crashed on its way out and the next run pays each trial once."""
    from honesteval.server.localserver import LocalServer

    home = seed_prefect_home(tmp_path / "home")  # its server's boot is not a first one
    root = make_project(tmp_path / "p", n_tasks=8, trials=3, kind="python")
    (root / "hold").touch()  # every target waits: the second Ctrl-C comes mid-target
    with LocalServer(home) as server:
        env = _serve_env(tmp_path, home, server.api_url)
        cli, run_id = _serve_a_run(root, env, "ctrl-c", server.api_url)
        wait_for_starts(root, 8, cli)
        cli.ctrl_c()
        time.sleep(0.3)
        seconds = _stop(cli, "ctrl-c")
        text = cli.text()
        assert cli.code == 130 and "interrupted again: stopped at once" in text, text[-3000:]
        assert seconds < BUDGET_S / 2, seconds
        assert "Traceback" not in text, text[-3000:]
        assert wait_gone(str(root), 5.0) == [] and wait_gone(run_id, 5.0) == []
        assert [s for s, _ in _runs_named(server.api_url, "evaluate-c1-val")] == ["CRASHED"]
        (root / "hold").unlink()
        assert paid_calls(root) == {}
        _resume(root, env, 24, 0, 1.0)


def test_serve_without_a_server_keeps_its_own_until_its_run_has_ended(tmp_path, seed_prefect_home):
    """No server up: serve starts a temporary one in a session of its own, which the
    terminal's Ctrl-C does not reach (Prefect's own shared serve's process group and died at
    once, leaving the run Running in the database). Read back through a server started on
    the same database afterwards."""
    from honesteval.server.localserver import LocalServer

    home = seed_prefect_home(tmp_path / "home")  # its server's boot is not a first one
    root = make_project(tmp_path / "p", n_tasks=8, trials=3, kind="command")
    env = {**_env(tmp_path, sleep_s=1.0, home=home), "PREFECT_RUNNER_POLL_FREQUENCY": "1"}
    cli, run_id = _serve_a_run(root, env, "ctrl-c", None)
    wait_for_calls(root, 8, cli)
    time.sleep(0.5)
    seconds = _stop(cli, "ctrl-c")
    text = cli.text()
    assert cli.code == 130 and seconds < BUDGET_S, (seconds, text[-3000:])
    kept = _kept_on_disk(root)
    assert SERVE_LINE.findall(text) == [("evaluate-c1-val", "Cancelled", str(kept), "24")]
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
    # serve, its run's process, its targets and its temporary server: all gone
    assert wait_gone(str(home), 10.0) == [] and wait_gone(run_id, 1.0) == []
    with LocalServer(home) as server:
        line = f"interrupted: {kept} of 24 trials kept; run the same command to resume"
        assert _runs_named(server.api_url, "evaluate-c1-val") == [("CANCELLED", line)]
        _resume(root, {**env, "PREFECT_API_URL": server.api_url}, 24, kept, 1.0)
