"""Stopped at any moment (Ctrl-C, SIGTERM, SIGKILL), a project is never wedged: the next run
finishes it, paying for no target twice.

The signal cells start the real CLI in a subprocess; Ctrl-C goes through a pseudo-terminal
(``pty.fork()``, then ``\\x03`` to the master), as a user types it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ProjectFactory, call_counts, run_cli, stored_trials

pytestmark = pytest.mark.slow


def _awaiting_score_everywhere(root, candidate: str = "base", **plan_kw) -> int:
    """Run every planned target and store its rollout, grading none: the state a run stopped
    between its targets and its scorer leaves (the last line per trial is the rollout
    awaiting its score). Returns how many trials that is."""
    from honesteval.evaluation import adapter_for, plan_evaluation
    from honesteval.trials import run_target_with_retries

    plan = plan_evaluation(root, candidate, "val", **plan_kw)
    adapter = adapter_for(str(root))
    for spec in plan.todo:
        run_target_with_retries(adapter, spec, plan.settings)
    return len(plan.todo)


def test_rollouts_awaiting_their_score_are_graded_by_the_next_run(tmp_path):
    from honesteval.trials import AWAITING_SCORE

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
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "2 reused from disk, 4 graded from stored rollouts, 2 ran" in proc.stdout
    assert sorted(call_counts(root).values()) == [1] * 8


# -- an internal error: one line, the traceback in a file ---------------------------------------

_INJECTED = """
import sys
import honesteval.status

def broken(*args, **kwargs):
    raise KeyError(("q56", 0))

honesteval.status.project_status = broken
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
