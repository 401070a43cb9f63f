"""Stopped at any moment (Ctrl-C, SIGTERM, SIGKILL), a project is never wedged: the next run
finishes it, paying for no target twice.

The signal cells start the real CLI in a subprocess; Ctrl-C goes through a pseudo-terminal
(``pty.fork()``, then ``\\x03`` to the master), as a user types it.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import ProjectFactory, call_counts, run_cli, stored_trials

pytestmark = pytest.mark.slow


def _awaiting_score_everywhere(root, candidate: str = "base") -> int:
    """Run every planned target and store its rollout, grading none: the state a run stopped
    between its targets and its scorer leaves (the last line per trial is the rollout
    awaiting its score). Returns how many trials that is."""
    from honesteval.evaluation import adapter_for, plan_evaluation
    from honesteval.trials import run_target_with_retries

    plan = plan_evaluation(root, candidate, "val")
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
    assert set(call_counts(root).values()) == {1} and len(call_counts(root)) == 10
    assert "10 graded from stored rollouts" in proc.stderr
    assert all(r["status"] == "ok" for r in stored_trials(root))

    again = run_cli("evaluate", "--project", str(root), "--candidate", "base", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reward"] == pytest.approx(3 / 5)
    assert set(call_counts(root).values()) == {1}
