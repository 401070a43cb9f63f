"""Progress a user sees while trials run: counts per trial, lines off a terminal, an ETA."""

from __future__ import annotations

from collections import Counter

from honesteval.evaluation import progress
from honesteval.evaluation.plan import plan_evaluation
from honesteval.evaluation.progress import ProgressLines, Snapshot
from honesteval.orchestration.tasks import batch_task_body


class Heard:
    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.announced: list[str] = []

    def progress(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)

    def announce(self, text: str) -> None:
        self.announced.append(text)


def test_line_says_done_total_statuses_and_eta():
    s = Snapshot("cand on val", total=120, done=45, reused=5, started=100.0, first_at=102.0)
    s.statuses.update({"ok": 38, "failed": 2, "infra_error": 1, "scorer_error": 1})
    # 40 trials ran, the first at t=102: 39 more in 8 s, 75 left -> 75 * 8/39 = 15.4 s
    assert s.line(now=110.0) == (
        "cand on val: 45/120 trials (38 ok, 2 failed, 2 missing, 3 awaiting a score), "
        "0:10 elapsed, ETA 0:15"
    )
    assert Snapshot("x", total=3).eta_s() is None  # nothing ran yet: no rate to go by
    assert progress.clock(3723) == "1:02:03" and progress.clock(65.4) == "1:05"


def test_a_batch_moves_the_count_per_trial(make_project):
    """The batch task reports each trial as its target returns, not once per batch."""
    root = make_project(["pass", "fail", "infra"], config={"retries": 0})
    plan = plan_evaluation(root, "base", "val")
    label = progress.label_of("base", "val")
    heard = Heard()
    with progress.listening(heard):
        progress.begin(label, plan.trials_planned)
        batch_task_body([s.model_dump() for s in plan.todo], plan.settings)
        progress.end(label)
    assert [s.done for s in heard.snapshots] == list(range(0, 10))  # begin, then 9 trials
    last = heard.snapshots[-1]
    # an infra_error needs no score: final at once; the 6 others await the score batch
    assert last.missing == 3 and last.count("ok") == 0 and "6 awaiting a score" in last.line()


def test_settle_never_takes_the_count_back():
    heard = Heard()
    with progress.listening(heard):
        progress.begin("c on val", 4, ["ok"])
        progress.trial_ran("c on val")
        progress.trial_ran("c on val")
        progress.settle("c on val", 2, Counter({"ok": 2}))  # the flow's count lags behind
        progress.trial_ran("elsewhere on val")  # not registered here (a Dask worker's): dropped
        progress.end("c on val")
    assert [s.done for s in heard.snapshots] == [1, 2, 3, 3]
    assert heard.snapshots[-1].count("ok") == 2


def test_lines_off_a_terminal_only_for_runs_that_last():
    written: list[str] = []
    lines = ProgressLines(written.append, every_s=3600)  # ticks driven by hand
    quick = Snapshot("quick on val", total=2)
    lines.progress(quick)
    quick.done, quick.statuses = 2, Counter({"ok": 2})
    lines.progress(quick)
    lines.tick()
    assert written == []  # done before the first tick: nothing to say

    slow = Snapshot("slow on val", total=3, done=1)
    lines.progress(slow)
    lines.tick()
    assert written[0].startswith("slow on val: 1/3 trials (0 ok, 0 failed, 0 missing, 1 ")
    done = Snapshot("slow on val", total=3, done=3, statuses=Counter({"ok": 2, "failed": 1}))
    lines.progress(done)
    assert written[-1].startswith("slow on val: 3/3 trials (2 ok, 1 failed, 0 missing), ")
    lines.announce("confirming, because")
    assert written[-1] == "confirming, because" and len(written) == 3
