"""Nothing a step or a command target starts outlives its trial (adapters/_process.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from honesteval.adapters import CommandTarget
from honesteval.adapters._process import TAG_VAR, run_isolated
from honesteval.errors import CandidateFailure, InfraError, TargetTimeout
from honesteval.models import Candidate, Task
from tests.helpers import run_cli, run_plain

# A child that ignores SIGTERM, records its pid, and would write `late.txt` after 4 s.
STUBBORN_CHILD = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "open(sys.argv[1] + '/child.pid', 'w').write(str(os.getpid()))\n"
    "time.sleep(4)\n"
    "open(sys.argv[1] + '/late.txt', 'w').write('too late')\n"
)


def _alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _live_processes(folder: Path, cmdline: bytes | None = None) -> list[int]:
    """Live processes with a honesteval process tag (and this exact command line, when
    given) that belong to this test's ``folder`` (other projects may run steps on the same
    machine at the same time)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        mine = str(folder).encode() in environ and TAG_VAR.encode() + b"=" in environ
        if mine and cmdline in (None, command) and _alive(int(entry)):
            found.append(int(entry))
    return found


def _assert_nothing_left(folder: Path) -> None:
    pid = int((folder / "child.pid").read_text())
    assert not _alive(pid), f"child {pid} still running"
    assert _live_processes(folder) == []
    time.sleep(4.5)  # past the moment the child would have written its file
    assert not (folder / "late.txt").exists()


def _write_child(folder: Path) -> Path:
    script = folder / "child.py"
    script.write_text(STUBBORN_CHILD)
    return script


def _run_script(folder: Path, body: str, timeout_s: float):
    (folder / "run.sh").write_text(body)
    return run_isolated(
        ["bash", str(folder / "run.sh")],
        cwd=folder,
        env={**os.environ, "TEST_FOLDER": str(folder)},
        stdout=folder / "out",
        stderr=folder / "err",
        timeout_s=timeout_s,
    )


def test_a_timed_out_run_kills_a_child_that_ignores_sigterm(tmp_path):
    script = _write_child(tmp_path)
    done = _run_script(tmp_path, f'"{sys.executable}" "{script}" "{tmp_path}" &\nwait\n', 1.0)
    assert done.timed_out
    _assert_nothing_left(tmp_path)


def test_a_detached_grandchild_holding_stdout_does_not_stall_and_is_killed(tmp_path):
    # setsid puts the grandchild in a new session (outside the group) with stdout still open;
    # the step itself exits at once.
    script = _write_child(tmp_path)
    body = (
        f'setsid "{sys.executable}" "{script}" "{tmp_path}" &\n'
        f'while [ ! -f "{tmp_path}/child.pid" ]; do sleep 0.05; done\n'
        "echo step done\n"
    )
    done = _run_script(tmp_path, body, 30.0)
    assert not done.timed_out and done.returncode == 0
    assert (tmp_path / "out").read_text() == "step done\n"
    _assert_nothing_left(tmp_path)


STEP_WITH_STUBBORN_CHILD = """
"$HONESTEVAL_PYTHON" "$HONESTEVAL_PROJECT/child.py" "$HONESTEVAL_PROJECT" &
sleep 30
"""


def test_a_timed_out_step_is_a_scorer_error_and_leaves_nothing_running(make_project):
    from tests.unit.test_steps import steps_project

    root = steps_project(
        make_project,
        {"slow.sh": STEP_WITH_STUBBORN_CHILD},
        {"steps": ["evaluation/slow.sh"]},
        tasks=[{"id": "a", "input": 1}],
        extra={"trials": 1, "timeout_s": 1.0},
    )
    _write_child(root)
    records, _ = run_plain(root)
    assert records[0].status == "scorer_error" and "ran past 1 s" in records[0].error
    ws = Path(records[0].score["details"]["workspace"])
    status = (ws / "logs/evaluate/steps/step_01_slow/status.txt").read_text()
    assert status == "failed\ntimeout\n"
    _assert_nothing_left(root)


def _command(tmp_path: Path, body: str, **kw) -> CommandTarget:
    (tmp_path / "cmd.py").write_text(body)
    return CommandTarget(
        tmp_path,
        [sys.executable, str(tmp_path / "cmd.py")],
        timeout_s=kw.pop("timeout_s", 30.0),
        infra_exit_codes=kw.pop("infra_exit_codes", []),
        env={},
    )


TASK = Task(id="t", input=1)


def _candidate(tmp_path: Path) -> Candidate:
    return Candidate(name="c", path=str(tmp_path), fingerprint="0" * 64)


def test_command_timeout_kills_its_stubborn_child(tmp_path):
    script = _write_child(tmp_path)
    body = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(script)!r}, {str(tmp_path)!r}])\n"
        "time.sleep(30)\n"
    )
    target = _command(tmp_path, body, timeout_s=1.0)
    with pytest.raises(TargetTimeout, match="timeout_s=1"):
        target.run(TASK, _candidate(tmp_path), seed=0, trial=0)
    _assert_nothing_left(tmp_path)


def test_command_with_a_detached_grandchild_returns_its_output(tmp_path):
    script = _write_child(tmp_path)
    body = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(script)!r}, {str(tmp_path)!r}],"
        " start_new_session=True)\n"
        f"while not os.path.exists({str(tmp_path / 'child.pid')!r}): time.sleep(0.05)\n"
        "print('{\"answer\": 42}')\n"
    )
    rollout = _command(tmp_path, body).run(TASK, _candidate(tmp_path), seed=0, trial=0)
    assert rollout.output == {"answer": 42}
    _assert_nothing_left(tmp_path)


@pytest.mark.parametrize(
    "body,codes,expected",
    [
        ("import sys; sys.exit(75)", [75], r"command exited 75 \(an infra exit code\)"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", [], "killed by signal 9"),
    ],
)
def test_command_infra_exit_codes_and_signals_are_infra_errors(tmp_path, body, codes, expected):
    target = _command(tmp_path, body, infra_exit_codes=codes)
    with pytest.raises(InfraError, match=expected) as exc:
        target.run(TASK, _candidate(tmp_path), seed=0, trial=0)
    assert not isinstance(exc.value, TargetTimeout)


def test_command_other_exit_codes_are_a_candidate_failure_not_infra(tmp_path):
    target = _command(tmp_path, "import sys; print('oops', file=sys.stderr); sys.exit(3)")
    with pytest.raises(CandidateFailure, match="command exited 3: oops") as exc:
        target.run(TASK, _candidate(tmp_path), seed=0, trial=0)
    assert not isinstance(exc.value, InfraError)


@pytest.mark.quick
def test_command_gets_the_task_on_stdin_and_the_seed_in_env(tmp_path):
    body = (
        "import json, os, sys\n"
        "task = json.load(sys.stdin)\n"
        "print(json.dumps([task['id'], os.environ['HONESTEVAL_SEED']]))\n"
    )
    rollout = _command(tmp_path, body).run(TASK, _candidate(tmp_path), seed=7, trial=2)
    assert rollout.output == ["t", "7"]


def test_sigterm_is_tried_before_sigkill(tmp_path):
    # A child that exits cleanly on SIGTERM leaves its mark (only its SIGTERM handler writes
    # term.txt): SIGTERM comes first, SIGKILL only after the grace period.
    body = (
        "import signal, sys, time\n"
        f"def bye(*a):\n    open({str(tmp_path / 'term.txt')!r}, 'w').write('x'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "time.sleep(30)\n"
    )
    (tmp_path / "c.py").write_text(body)
    done = run_isolated(
        [sys.executable, str(tmp_path / "c.py")],
        cwd=tmp_path,
        env={**os.environ, "TEST_FOLDER": str(tmp_path)},
        stdout=tmp_path / "out",
        stderr=tmp_path / "err",
        timeout_s=5.0,  # time for the interpreter to start and install its handler
    )
    assert done.timed_out and (tmp_path / "term.txt").exists()


# A python target that leaves a grandchild behind in its own session, then answers.
SETSID_TARGET = """
import subprocess
from pathlib import Path

def run(task, candidate_dir, seed):
    pid_file = Path(candidate_dir).parent.parent / f"sleeper-{task['id']}.pid"
    subprocess.run(f"setsid sleep 91 & echo $! > {pid_file}", shell=True, check=True)
    return 1

def score(task, output):
    return 1.0
"""


@pytest.mark.slow
def test_an_isolated_python_target_leaves_no_setsid_grandchild(make_project, cli_env):
    root = make_project(
        ["pass", "pass"],
        target_code=SETSID_TARGET,
        config={
            "trials": 1,
            "adapter": {
                "kind": "python",
                "target": "target:run",
                "scorer": "target:score",
                "isolate": True,
            },
        },
    )
    env = {**cli_env, "HONESTEVAL_TEST_FOLDER": str(root)}  # marks this test's processes
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=env)
    assert proc.returncode == 0, proc.stderr
    pids = [int(p.read_text()) for p in root.glob("sleeper-*.pid")]
    assert len(pids) == 2  # one grandchild per trial was started: something to sweep
    assert not any(_alive(pid) for pid in pids)
    # nor any other `sleep 91` that carries the trial's tag (found through /proc)
    assert _live_processes(root, cmdline=b"sleep\x0091\x00") == []
