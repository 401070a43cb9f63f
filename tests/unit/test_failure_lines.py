"""Failures named where they happen: one line per status other than ok, the candidate's own
failures first, each with a task, its seed and its error's first line; the summary artifact
lists them first."""

from __future__ import annotations

from honesteval.models import TaskTrials
from honesteval.stats import aggregate
from honesteval.views.text import failure_lines, summary_markdown
from tests.helpers import screen_trial


def test_each_status_in_one_line_the_candidates_own_failures_first():
    records = [
        screen_trial("q01", 0, "ok"),
        screen_trial("q02", 1, "infra_error", "InfraError: backend down"),
        screen_trial("q09", 3, "failed", "ValueError: no digits in 'x'\nTraceback (most recent…"),
        screen_trial("q09", 4, "failed", "ValueError: again"),
        screen_trial("q11", 3, "failed", None),
    ]
    assert failure_lines(records) == [
        "failed: 3 trials on 2 tasks, e.g. q09 (seed 3): ValueError: no digits in 'x'",
        "infra_error: 1 trial on 1 task, e.g. q02 (seed 1): InfraError: backend down",
    ]
    assert failure_lines([screen_trial("q01", 0, "ok")]) == []


def test_the_summary_artifact_lists_the_failed_trials_first_and_links_the_others():
    tasks = [
        TaskTrials(id="q09", statuses=["failed", "ok"], rewards=[0.0, 1.0]),
        TaskTrials(id="q10", statuses=["ok", "ok"], rewards=[1.0, 1.0]),
    ]
    result = aggregate(tasks, candidate="careful", fingerprint="f" * 64, split="val")
    bad = [screen_trial("q09", 0, "failed", "ValueError: no digits")]
    md = summary_markdown(result, bad, {"rollouts": "/artifacts/key/rollouts-val-careful"})
    lines = md.splitlines()
    assert lines[2] == "## Trials that did not end ok: 1"
    assert "| q09 | 0 | failed | ValueError: no digits |" in lines
    assert md.index("| q09 |") < md.index("**reward:**")
    assert lines[-1] == "**artifacts:** [rollouts](/artifacts/key/rollouts-val-careful)"
