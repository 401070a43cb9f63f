"""An evaluation tallied trial by trial as trials finish (what the flow keeps instead of every
record) gives the aggregate's input, the usage figures and the counts that the whole set of
records gives: expected values written by hand from the fixture below."""

from __future__ import annotations

import random

import pytest

from honesteval.evaluation.tally import EvaluationTally
from honesteval.evaluation.trial import AWAITING_SCORE
from honesteval.models import TaskTrials, TrialRecord
from honesteval.stats import aggregate


def rec(task: str, k: int, status: str, reward: float | None = None, **more: object) -> TrialRecord:
    return TrialRecord(
        task_id=task,
        candidate="c",
        fingerprint="f",
        split="val",
        trial=k,
        seed=10 + k,
        status=status,  # type: ignore[arg-type]
        reward=reward,
        started_at="2026-12-02T00:00:00Z",
        **more,  # type: ignore[arg-type]
    )


def steps(*pairs: tuple[str, float]) -> dict[str, object]:
    return {"details": {"steps": [{"step": s, "seconds": x} for s, x in pairs]}}


TASKS = [("a", None), ("b", "g1"), ("c", "g1"), ("d", None)]
# a: all ran here; a failed trial and a trial with feedback after one without
# b: one reused trial, one crashed task run (infra_error), one stored rollout graded here
# c: a scorer error; a stored rollout whose grading never came back (stays awaiting)
# d: every trial reused
REUSED = [
    rec("b", 0, "ok", 0.75, feedback="b0 reused", tokens=7),
    rec("d", 0, "ok", 1.0),
    rec("d", 1, "failed", 0.0, feedback="d1"),
    rec("d", 2, "ok", 0.5),
]
AWAITING = [
    rec("b", 1, "scorer_error", None, error=AWAITING_SCORE, feedback="stale", tokens=100),
    rec("c", 2, "scorer_error", None, error=AWAITING_SCORE, cost=0.25),
]
FINISHED = [
    rec("a", 0, "ok", 1.0, feedback="a0", tokens=10, cost=0.5, score=steps(("judge", 2.0))),
    rec("a", 1, "failed", None, error="ValueError: boom"),
    rec("a", 2, "ok", 0.5, score=steps(("judge", 1.0), ("lint", 0.5))),
    rec("b", 2, "infra_error", None, error="task run crashed: RuntimeError: lost"),
    rec("b", 1, "ok", 0.25, tokens=20),  # the graded record of the stored rollout
    rec("c", 0, "scorer_error", None, error="InfraError: judge down"),
    rec("c", 1, "ok", 0.0, feedback="c1", cost=1.5),
]

EXPECTED = [
    TaskTrials(id="a", statuses=["ok", "failed", "ok"], rewards=[1.0, None, 0.5], feedback="a0"),
    TaskTrials(
        id="b",
        cluster="g1",
        statuses=["ok", "ok", "infra_error"],
        rewards=[0.75, 0.25, None],
        feedback="b0 reused",  # b1's stored feedback went with the stored rollout
    ),
    TaskTrials(
        id="c",
        cluster="g1",
        statuses=["scorer_error", "ok", "scorer_error"],
        rewards=[None, 0.0, None],
        feedback="c1",
    ),
    TaskTrials(id="d", statuses=["ok", "failed", "ok"], rewards=[1.0, 0.0, 0.5], feedback="d1"),
]


def tally_in(chunks: list[list[TrialRecord]]) -> EvaluationTally:
    tally = EvaluationTally(TASKS, 3, reused=REUSED, awaiting=AWAITING)
    for chunk in chunks:
        tally.add(chunk)
    return tally


@pytest.mark.parametrize("seed", range(5))
def test_tallied_as_trials_finish_equals_every_record_at_once(seed: int) -> None:
    shuffled = random.Random(seed).sample(FINISHED, len(FINISHED))
    cut = random.Random(seed + 100).randrange(1, len(shuffled))
    streamed = tally_in([shuffled[:cut], shuffled[cut:]])
    at_once = tally_in([FINISHED])
    assert streamed.task_trials() == at_once.task_trials() == EXPECTED
    assert aggregate(streamed.task_trials(), n_trials=3) == aggregate(EXPECTED, n_trials=3)
    # tokens: 10 + 7 + 20 (b1's graded record replaces the stored rollout's 100)
    # cost: 0.5 + 1.5 + 0.25 (c2 is still the stored rollout); steps: judge 2 + 1, lint 0.5
    assert streamed.usage() == {
        "tokens": 37,
        "cost": 2.25,
        "step_seconds": {"judge": 3.0, "lint": 0.5},
    }
    assert (streamed.n_reused, streamed.n_ran, streamed.n_graded) == (4, 6, 1)
    assert streamed.n_final == 4 + 6 + 1  # what the progress bar and counts show as done


def test_no_usage_is_none_not_zero() -> None:
    tally = EvaluationTally([("a", None)], 1)
    tally.add([rec("a", 0, "ok", 1.0)])
    assert tally.usage() == {"tokens": None, "cost": None, "step_seconds": None}


def test_running_counts_cover_only_finished_tasks() -> None:
    tally = EvaluationTally(TASKS, 3, reused=REUSED, awaiting=AWAITING)
    # d finished (all reused): scored, mean of its counted rewards (1 + 0 + 0.5) / 3
    assert tally.coverage() == (1, 1)
    assert tally.reward() == pytest.approx(0.5)
    tally.add(FINISHED[:3])  # a finishes: mean (1 + 0.5) / 2 (its failed trial has no reward)
    assert tally.coverage() == (2, 2)
    assert tally.reward() == pytest.approx((0.5 + 0.75) / 2)
    tally.add(FINISHED[3:])  # b finishes; c's third trial is still awaiting its score
    assert tally.coverage() == (3, 3)
    assert tally.line() == (
        "11/12 trials done (2 failed, 1 infra_error, 7 ok, 1 scorer_error); "
        "coverage so far 1.00 (3/3 finished tasks scored); running reward 0.583"
    )


def test_a_trial_without_a_record_is_refused() -> None:
    tally = EvaluationTally([("a", None)], 2)
    tally.add([rec("a", 0, "ok", 1.0)])
    with pytest.raises(ValueError, match=r"task 'a': trials \[1\] have no record"):
        tally.task_trials()
