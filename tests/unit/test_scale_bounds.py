"""What grows with the trials stays bounded: the rollouts table artifact and the report's
drill-down list the worst and most informative tasks up to a fixed count, and say where the
rest is. Counts and bytes, checked against the trial logs on disk (no timing)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

from honesteval.store.trial_log import deferred_sync
from tests.helpers import ProjectFactory, run_plain, stored_trials
from tests.synthetic_state import synthetic_state

ROLLOUT_ROWS = 1000  # documented in orchestration/flows/_artifacts.py
DRILLDOWN_TRIALS = 3000  # documented in views/html.py


def _tasks_by_outcome(root: Path) -> tuple[set[str], dict[str, float]]:
    """(tasks with a trial not ok, mean counted reward of every all-ok task), from the logs."""
    bad: set[str] = set()
    rewards: dict[str, list[float]] = defaultdict(list)
    for rec in stored_trials(root, "val"):
        if rec["status"] != "ok":
            bad.add(rec["task_id"])
        else:
            rewards[rec["task_id"]].append(rec["reward"])
    return bad, {t: sum(r) / len(r) for t, r in rewards.items() if t not in bad}


class _Drilldown(HTMLParser):
    """The drill-down's tasks (``details.task``) and its trial rows (body rows of their tables)."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[str] = []
        self.rows = 0
        self._in_task = self._in_body_row = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "details" and a.get("data-task") is not None:
            self.tasks.append(a["data-task"] or "")
            self._in_task = True
        elif tag == "tr" and self._in_task:
            self._in_body_row = True
        elif tag == "td" and self._in_body_row:
            self.rows += 1
            self._in_body_row = False  # one count per row

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self._in_task = False


@pytest.mark.parametrize("n_tasks", [900, 2700])  # 3,600 and 10,800 trials
def test_report_lists_at_most_3000_trials_worst_first_and_says_so(
    tmp_path: Path, n_tasks: int
) -> None:
    from honesteval.views.html import write_report

    root = synthetic_state(tmp_path, n_tasks, {"c": 0.5}, n_trials=4, output_chars=300)
    path, _ = write_report(root)
    text = path.read_text(encoding="utf-8")
    page = _Drilldown()
    page.feed(text)
    assert page.rows == 4 * len(page.tasks) <= DRILLDOWN_TRIALS
    shown = set(page.tasks)
    bad, means = _tasks_by_outcome(root)
    if 4 * len(bad) <= DRILLDOWN_TRIALS:
        assert bad <= shown  # every task with a failed or errored trial is listed
    ok_shown = [means[t] for t in shown - bad]
    ok_hidden = [means[t] for t in set(means) - shown]
    assert not ok_shown or not ok_hidden or max(ok_shown) <= min(ok_hidden)  # lowest first
    note = re.search(r'<p class="cut">(.*?)</p>', text, re.S)
    assert note is not None
    assert f"{page.rows:,} of {4 * n_tasks:,} trials" in note[1]
    assert "honesteval export --split val" in note[1]
    # bounded: ~600 bytes per listed trial plus the plots, whatever the number of trials
    assert len(text.encode("utf-8")) < DRILLDOWN_TRIALS * 1000 + 500_000


def test_report_under_the_bound_lists_every_trial_without_a_note(tmp_path: Path) -> None:
    from honesteval.views.html import write_report

    root = synthetic_state(tmp_path, 50, {"a": 0.3, "b": 0.7}, n_trials=3)
    path, _ = write_report(root)
    page = _Drilldown()
    text = path.read_text(encoding="utf-8")
    page.feed(text)
    assert page.rows == 50 * 2 * 3 and len(page.tasks) == 50
    assert 'class="cut"' not in text


def test_rollouts_table_keeps_the_worst_tasks_up_to_1000_rows(tmp_path: Path) -> None:
    from honesteval.evaluation.plan import plan_evaluation
    from honesteval.orchestration.flows._artifacts import rollouts_table

    behaviours = ["seeded"] * 280 + ["fail"] * 10 + ["scorer_error"] * 10  # 300 × 4 trials
    root = ProjectFactory(tmp_path)(behaviours, candidates={"c": 0.5}, config={"trials": 4})
    plan = plan_evaluation(root, "c", "val")  # the plan of this first run: nothing reused
    with deferred_sync():
        records, _ = run_plain(root, "c")
    assert len(records) == 300 * 4 and not plan.reused
    rows, description = rollouts_table(plan, records)
    assert len(rows) <= ROLLOUT_ROWS and len(rows) % 4 == 0  # whole tasks
    by_task: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_task[row["task"]].append(row)
    assert all(len(r) == 4 for r in by_task.values())
    bad, means = _tasks_by_outcome(root)
    assert len(bad) == 10 and bad <= set(by_task)  # the scorer errors: all listed first
    # then the tasks whose trials disagree (binary rewards: a spread of 1), lowest mean first,
    # before any task whose trials agree ("fail": all 0)
    mixed = {t for t, m in means.items() if 0 < m < 1}
    shown_mixed, hidden_mixed = mixed & set(by_task), mixed - set(by_task)
    assert len(shown_mixed) > 200
    assert not hidden_mixed or set(by_task) <= bad | mixed
    assert max(means[t] for t in shown_mixed) <= min((means[t] for t in hidden_mixed), default=1)
    assert f"{len(rows)} of {300 * 4} trials" in description
    assert "honesteval export --split val --candidate c" in description
    assert len(json.dumps(rows)) < ROLLOUT_ROWS * 400  # ~250 bytes a row: bounded


def test_rollouts_table_chosen_as_trials_finish_is_the_worst_tasks_of_all(tmp_path: Path) -> None:
    """The flow feeds the table trial by trial, in whatever order they finish, keeping only the
    rows of the best tasks so far: the table is the one the rule picks over every trial
    (recomputed here from the records: most trials not ok, widest spread, lowest mean, id)."""
    import random

    from honesteval.evaluation.plan import plan_evaluation
    from honesteval.orchestration.flows._artifacts import RolloutsSample

    behaviours = ["seeded"] * 560 + ["fail"] * 20 + ["scorer_error"] * 20  # 600 × 2 trials
    root = ProjectFactory(tmp_path)(behaviours, candidates={"c": 0.5}, config={"trials": 2})
    plan = plan_evaluation(root, "c", "val")
    with deferred_sync():
        records, _ = run_plain(root, "c")
    by_task: dict[str, list] = defaultdict(list)
    for r in records:
        by_task[r.task_id].append(r)

    def order(tid: str) -> tuple[int, float, float, str]:
        rewards = [r.reward for r in by_task[tid] if r.reward is not None]
        not_ok = sum(r.status != "ok" for r in by_task[tid])
        spread = max(rewards) - min(rewards) if rewards else 0.0
        mean = sum(rewards) / len(rewards) if rewards else 0.0
        return -not_ok, -spread, mean, tid

    shown = sorted(by_task, key=order)[: ROLLOUT_ROWS // 2]  # whole tasks of 2 rows
    expected = sorted((r.task_id, r.trial) for tid in shown for r in by_task[tid])

    sample = RolloutsSample(plan)
    shuffled = random.Random(7).sample(records, len(records))
    for start in range(0, len(shuffled), 7):
        sample.add(shuffled[start : start + 7])
    rows, description = sample.table()
    assert [(row["task"], row["trial"]) for row in rows] == expected
    assert f"{ROLLOUT_ROWS} of {600 * 2} trials" in description
    assert f"({ROLLOUT_ROWS // 2} of 600 tasks" in description
