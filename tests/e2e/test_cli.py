"""The command line as a user meets it: bad input is one line and exit 2; results print."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
import yaml

from honesteval.cli import main
from tests.helpers import call_counts, run_cli, stored_trials


def run_main(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code), out, err


def edit_yaml(root, **changes) -> None:
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg.update(changes)
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def bad_key(root):
    with (root / "honesteval.yaml").open("a") as fh:
        fh.write("colour: blue\n")


def bad_adapter(root):
    edit_yaml(root, adapter={"kind": "grpc", "scorer": "target:score"})


def dup_ids(root):
    (root / "tasks.jsonl").write_text('{"id": "a"}\n{"id": "a"}\n')


def int_id(root):
    (root / "tasks.jsonl").write_text('{"id": 3}\n')


def empty_cluster(root):
    (root / "tasks.jsonl").write_text('{"id": "a"}\n{"id": "b", "cluster": ""}\n')
    edit_yaml(root, splits={"train": [], "val": ["a", "b"], "test": []})


def empty_val(root):
    edit_yaml(root, splits={"train": ["t00"], "val": [], "test": []})


def nothing(root):
    pass


@pytest.mark.quick
@pytest.mark.parametrize(
    "mutate,args,message",
    [
        (bad_key, [], r"honesteval.yaml:\d+: colour: unknown key"),
        (bad_adapter, [], r"adapter.kind: Input should be .*'grpc'"),
        (nothing, ["--split", "dev"], r"unknown split 'dev'"),
        (nothing, ["--split", "test"], r"test split is sealed"),
        (nothing, ["--trials", "0"], r"--trials must be >= 1, got 0"),
        (nothing, ["--trials", "x"], r"Invalid value for '--trials'"),
        (nothing, ["--ks", "0,1"], r"--ks must be >= 1, got 0"),
        (nothing, ["--ks", "a"], r"--ks must be comma-separated integers"),
        (nothing, ["--max-concurrency", "0"], r"--max-concurrency must be >= 1"),
        (nothing, ["--candidate", "ghost"], r"unknown candidate 'ghost'"),
        (nothing, ["--task-ids", "nope"], r"task ids not in split 'val'"),
        (dup_ids, [], r"duplicate task id 'a'"),
        (int_id, [], r"task id must be a string"),
        (
            empty_cluster,
            [],
            r"tasks.jsonl:2: cluster: an empty cluster name is not a cluster: omit 'cluster'",
        ),
        (empty_val, [], r"split 'val' has no tasks"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(make_project, capsys, mutate, args, message):
    root = make_project(["pass"])
    mutate(root)
    code, out, err = run_main(
        ["evaluate", "--project", str(root), "--candidate", "base", *args], capsys
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(message, lines[0]), lines[0]
    assert "Traceback" not in out + err
    assert not (root / ".honesteval" / "trials").exists()
    assert not (root / ".honesteval" / "results").exists()


def test_missing_project(tmp_path, capsys, monkeypatch):
    code, _, err = run_main(["evaluate", "--project", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "no honesteval.yaml" in err
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["status"], capsys)
    assert code == 2
    assert err == "error: no honesteval.yaml in .: pass --project PATH or run `honesteval init`\n"


def test_version(capsys):
    from importlib.metadata import version

    code, out, err = run_main(["--version"], capsys)
    assert code == 0 and out == f"honesteval {version('honesteval')}\n" and err == ""


def test_unknown_option_is_one_line(capsys):
    code, _, err = run_main(["evaluate", "--colour"], capsys)
    assert code == 2 and err.strip().splitlines() == ["error: No such option: --colour"]


def test_check_warns_when_seeds_do_not_matter(make_project, capsys):
    root = make_project(["same"])
    code, out, _ = run_main(["check", "--project", str(root)], capsys)
    assert code == 0
    assert "every variance number here is fiction" in out and "WARN seeds" in out


def test_check_passes_a_seeded_target(make_project, capsys):
    root = make_project(["graded"])
    code, out, _ = run_main(["check", "--project", str(root)], capsys)
    assert code == 0
    assert (
        "OK   seeds: the seed changes the rollout (candidate 'base' on task 't00': seeds 0 and 1"
        in out
    )
    assert "OK   scorer deterministic" in out and "OK   tasks stable" in out


def test_check_reports_a_broken_target(make_project, capsys):
    root = make_project(["bug"])
    code, out, _ = run_main(["check", "--project", str(root)], capsys)
    assert code == 1 and "FAIL target" in out and "ValueError" in out


def test_init_scaffolds_a_project_that_checks(tmp_path, capsys):
    code, _, _ = run_main(["init", str(tmp_path / "new")], capsys)
    assert code == 0
    code, out, _ = run_main(["check", "--project", str(tmp_path / "new")], capsys)
    assert code == 0 and "FAIL" not in out
    code, _, err = run_main(["init", str(tmp_path / "new")], capsys)
    assert code == 2 and "already exists" in err


@pytest.mark.quick
@pytest.mark.slow
def test_evaluate_json_and_human_output(make_project, cli_env):
    root = make_project(["pass", "fail", "graded"])
    proc = run_cli(
        "evaluate",
        "--project",
        str(root),
        "--candidate",
        "base",
        "--trials",
        "1",
        "--json",
        env=cli_env,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["n_tasks"] == 3 and result["coverage"] == 1.0
    assert "n_trials=1: within-task variance is unmeasured" in result["warnings"]

    proc = run_cli(
        "evaluate",
        "--project",
        str(root),
        "--candidate",
        "base",
        "--trials",
        "3",
        "-v",
        env=cli_env,
    )
    assert proc.returncode == 0, proc.stderr
    for needle in ("reward", "95% CI", "coverage  1.00 (3/3 tasks scored", "pass^k", "pass@k"):
        assert needle in proc.stdout
    assert "1 reused" not in proc.stdout and "3 reused from disk" in proc.stdout


def test_a_long_lived_server_records_every_task_run_the_cli_left_it(make_project, cli_env):
    """With a long-lived server (here the session's) the CLI exits without waiting for the
    server to record its last task runs; the server still records all of them."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterStartTime,
    )

    from tests.prefect_reads import task_runs

    root = make_project(["pass", "fail", "graded"])
    since = datetime.now(UTC)
    args = ["evaluate", "--project", str(root), "--candidate", "base", "--trials", "2"]
    proc = run_cli(*args, "--json", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                name=FlowRunFilterName(any_=["evaluate-base-val"]),
                start_time=FlowRunFilterStartTime(after_=since),
            )
        )
    assert len(runs) == 1
    expected = 3 * 2 * 2 + 1  # a run_trial and a score task run per trial, then aggregate
    runs_of_it = task_runs(runs[0].id, expected=expected, wait_s=60)
    assert sum(r.state is not None and r.state.is_final() for r in runs_of_it) == expected


@pytest.mark.slow
def test_low_coverage_exit_code_3(make_project, cli_env):
    root = make_project(["pass", "infra", "infra"], config={"retries": 0})
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=cli_env)
    assert proc.returncode == 3, proc.stderr
    assert "coverage 0.33 < 0.60" in proc.stdout


@pytest.mark.slow
def test_killed_run_resumes_with_exact_totals(make_project, cli_env):
    tasks = [
        {"id": f"k{i}", "input": {"behaviour": "pass", "sleep": 0.3}, "target": "yes"}
        for i in range(10)
    ]
    root = make_project(tasks=tasks, config={"trials": 2})
    args = [
        sys.executable,
        "-m",
        "honesteval.cli",
        "evaluate",
        "--project",
        str(root),
        "--candidate",
        "base",
        "--max-concurrency",
        "2",
        "--json",
    ]
    proc = subprocess.Popen(
        args, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    trial_dir = root / ".honesteval" / "trials"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if trial_dir.is_dir() and len(stored_trials(root)) >= 4:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # A stored trial is finished (ok) or a rollout stored before its score: neither target
    # runs again; the second is graded on resume.
    stored = {(r["task_id"], r["seed"]): r["status"] for r in stored_trials(root)}
    done_before = set(stored)
    ok_before = {name for name, status in stored.items() if status == "ok"}
    assert 4 <= len(done_before) < 20
    calls_before = call_counts(root)

    proc2 = run_cli(*args[3:], env=cli_env)
    assert proc2.returncode == 0, proc2.stderr
    result = json.loads(proc2.stdout)
    assert result["trials_reused"] == len(ok_before)
    assert result["trials_ok"] == 20 and result["coverage"] == 1.0 and result["reward"] == 1.0
    calls_after = call_counts(root)
    rerun = {k: calls_after[k] - calls_before.get(k, 0) for k in calls_after}
    for key in done_before:  # a finished trial is never paid for twice
        assert rerun[key] == 0
    assert sum(rerun.values()) == 20 - len(done_before)


def only_honesteval_lines(stderr: str, label: str) -> list[str]:
    """stderr holds nothing but honesteval's own lines (the temporary server's notice and the
    progress lines off a terminal); returns the progress lines."""
    lines = stderr.splitlines()
    notice = "starting a temporary Prefect server for this run"
    progress = [line for line in lines if line.startswith(f"{label}: ")]
    assert all(line.startswith(notice) for line in lines if line not in progress), stderr
    return progress


@pytest.mark.slow
def test_in_process_evaluate_leaves_a_quiet_terminal(make_project, tmp_path, seed_prefect_home):
    """A CLI evaluate on its own temporary server (a PREFECT_HOME of its own): stderr stays
    empty.

    The temporary server is stopped when the CLI exits; before the fix, its task-run
    recorder was still writing the run's last events and logged ~150 lines of
    ``Error flushing … CancelledError`` tracebacks. Afterwards every task run is recorded.
    """
    root = make_project(["pass", "fail", "infra", "flaky", "graded"] * 4, config={"retries": 1})
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(seed_prefect_home(tmp_path / "prefect-home"))  # not a first boot
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr
    # progress lines come every few seconds off a terminal: a quick run may print none
    only_honesteval_lines(proc.stderr, "base on val")
    # pass, fail, graded are scored; infra never works and flaky needs 2 retries (has 1)
    assert "  coverage  12/20 tasks scored; " in proc.stdout


@pytest.mark.slow
def test_a_short_run_on_a_temporary_server_keeps_its_last_log_lines(
    make_project, tmp_path, seed_prefect_home
):
    """A run shorter than Prefect's 2 s log batch: its log lines reach the temporary server's
    database (what the UI shows later) before the server is stopped. Before the fix, none did,
    and the attempt to send them at exit printed ``--- Error logging to API ---``."""
    root = make_project(["pass", "pass"], config={"trials": 3})
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(seed_prefect_home(tmp_path / "prefect-home"))  # not a first boot
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=env)
    assert proc.returncode == 0, proc.stderr
    only_honesteval_lines(proc.stderr, "base on val")
    with contextlib.closing(sqlite3.connect(tmp_path / "prefect-home" / "prefect.db")) as db:
        lines = [m for (m,) in db.execute("SELECT message FROM log ORDER BY timestamp")]
        unfinished = db.execute(
            "SELECT count(*) FROM task_run WHERE state_type NOT IN "
            "('COMPLETED', 'FAILED', 'CRASHED', 'CANCELLED')"
        ).fetchone()[0]
    # The progress lines of the run: before the first trial, and after the last (2 x 3
    # trials); then its result, the run's last line (two passing tasks: 1 ± 0 on 2 of 2).
    assert [m.split(";")[0] for m in lines] == [
        "base on val: 0/6 trials done (none yet)",
        "base on val: 6/6 trials done (6 ok)",
        "reward 1.00 ± 0.00, coverage 2/2",
    ]
    assert unfinished == 0


def test_the_first_flow_runs_imports_are_done_while_a_temporary_server_boots():
    """What the first flow run would import on first use is imported during the wait for a
    temporary server, and the wait ends only when it is done (no import races the flow)."""
    from honesteval.server import in_process as _local

    code = (
        "import sys, time\n"
        "from honesteval.server.in_process import _FIRST_USE_MODULES, imports_meanwhile\n"
        "assert 'scipy.special' not in sys.modules\n"
        "with imports_meanwhile():\n"
        "    pass\n"  # a server that is ready at once: the block still waits for the imports
        "print(sorted(m for m in _FIRST_USE_MODULES if m not in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert "scipy.special" in _local._FIRST_USE_MODULES  # the t quantile of every result


def test_the_quick_exit_keeps_exit_handlers_threads_output_and_the_exit_code(tmp_path):
    """`honesteval` ends its process without Python's slow teardown, but only after what that
    teardown would have done first: a thread that is not a daemon finishes, exit handlers run,
    output and a file left open are flushed, and the exit code is the command's."""
    code = (
        "import atexit, sys, threading, time\n"
        "from pathlib import Path\n"
        "from honesteval.cli import command\n"
        f"out = Path({str(tmp_path)!r})\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    (out / 'thread').write_text('done')\n"
        "threading.Thread(target=late).start()\n"
        "atexit.register(lambda: (out / 'atexit').write_text('ran'))\n"
        "kept_open = open(out / 'appended', 'a')\n"  # never flushed nor closed
        "kept_open.write('last line of a target')\n"
        "sys.stdout.write('unflushed line without newline')\n"
        "sys.argv = ['honesteval', 'status', '--project', sys.argv[1]]\n"
        "command()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "missing")], capture_output=True, text=True
    )
    assert proc.returncode == 2  # no project there: bad input
    assert proc.stderr.startswith("error: no honesteval.yaml in")
    assert proc.stdout == "unflushed line without newline"
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "appended").read_text() == "last line of a target"


@pytest.mark.slow
def test_empty_cluster_is_refused_at_load_in_a_real_process(make_project):
    root = make_project(["pass"])
    empty_cluster(root)
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: "
        f"{root / 'tasks.jsonl'}:2: cluster: an empty cluster name is not a cluster: "
        "omit 'cluster' for a task of its own"
    ]
    assert "Traceback" not in proc.stdout + proc.stderr
