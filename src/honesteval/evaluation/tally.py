"""One evaluation's trials as they finish, kept as small as its result needs.

Plain Python. An :class:`EvaluationTally` keeps, per task and trial, the status and reward
(and the last feedback, tokens, cost and evaluation-step seconds where a trial has them),
never the :class:`~honesteval.models.TrialRecord`: what ``honesteval.stats.aggregate`` and the
result's usage fields read, a few dozen bytes a trial instead of the record's kilobytes (a
50,000-trial evaluation held 215 MB of records until it aggregated).

It also gives the running counts the flow logs while an evaluation goes (:meth:`line`):
statuses, coverage so far and running reward. Coverage so far is over the tasks whose trials
have all finished: a task with at least one counted trial (``ok``, or ``failed``: the
candidate's own failure at ``failure_reward``) is scored, like in the final result. The
running reward is the mean over scored finished tasks of their mean counted reward (the
estimator of the final result, before its SE).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from honesteval.models import COUNTED_STATUSES, BudgetStop, TaskTrials, TrialRecord, TrialStatus

WARN_AFTER_TASKS = 5

#: (step name, seconds) of each evaluation step a trial's scorer ran
StepSeconds = tuple[tuple[str, float], ...]


class _TaskSlots:
    """One task's trials by trial number: what each final trial says, nothing else."""

    __slots__ = ("cluster", "cost", "done", "feedback", "rewards", "statuses", "steps", "tokens")

    def __init__(self, cluster: str | None, n_trials: int):
        self.cluster = cluster
        self.statuses: list[TrialStatus | None] = [None] * n_trials
        self.rewards: list[float | None] = [None] * n_trials
        #: trial -> its feedback, for the highest-numbered final trial with feedback and the
        #: awaiting ones above it (their graded record may say otherwise): never more
        self.feedback: dict[int, str] | None = None
        #: per trial, made only once a trial has any (most no-op or offline targets: never)
        self.tokens: list[int | None] | None = None
        self.cost: list[float | None] | None = None
        self.steps: list[StepSeconds | None] | None = None
        #: trials added (reused or finished in this run): the task is finished at n_trials
        self.done = 0

    def put(self, r: TrialRecord, *, awaiting: bool = False) -> None:
        k = r.trial
        self.statuses[k] = r.status
        self.rewards[k] = r.reward
        if r.feedback:
            kept = self.feedback if self.feedback is not None else {}
            if not awaiting:  # final: no trial below it can be the last with feedback
                kept = {j: text for j, text in kept.items() if j > k}
            kept[k] = r.feedback
            self.feedback = kept
        elif self.feedback is not None:
            self.feedback.pop(k, None)  # an awaiting trial's graded record has none
        self.tokens = _put(self.tokens, k, r.tokens, len(self.statuses))
        self.cost = _put(self.cost, k, r.cost, len(self.statuses))
        self.steps = _put(self.steps, k, _step_seconds(r), len(self.statuses))

    def last_feedback(self) -> str | None:
        return self.feedback[max(self.feedback)] if self.feedback else None

    def counted_rewards(self) -> list[float]:
        return [
            reward
            for status, reward in zip(self.statuses, self.rewards, strict=True)
            if status in COUNTED_STATUSES and reward is not None
        ]


def _put(values: list[Any] | None, k: int, value: Any, n: int) -> list[Any] | None:
    if value is None and values is None:
        return None
    values = values if values is not None else [None] * n
    values[k] = value
    return values


def _step_seconds(r: TrialRecord) -> StepSeconds | None:
    steps = (r.score or {}).get("details", {}).get("steps", [])
    return tuple((step["step"], step["seconds"]) for step in steps) or None


class EvaluationTally:
    """The trials of one evaluation of ``n_trials`` trials per task, by task id.

    ``reused``: stored trials taken as they are (counted as finished from the start);
    ``awaiting``: stored rollouts this run grades, which count as what they are on disk
    until their graded record is added (and then as that). :meth:`add` each trial once, as
    it is final.
    """

    def __init__(
        self,
        tasks: Iterable[tuple[str, str | None]],
        n_trials: int,
        reused: Iterable[TrialRecord] = (),
        awaiting: Iterable[TrialRecord] = (),
    ):
        self.n_trials = n_trials
        self._tasks = {task_id: _TaskSlots(cluster, n_trials) for task_id, cluster in tasks}
        self.statuses: Counter[str] = Counter()
        self._awaiting: set[tuple[str, int]] = set()
        for r in awaiting:
            self._tasks[r.task_id].put(r, awaiting=True)
            self._awaiting.add((r.task_id, r.trial))
        self.n_reused = self.n_ran = self.n_graded = 0
        #: target calls per (task id, seed), as the run's call journal says; None: the run
        #: kept no journal (trials run in process: one call per trial that ran)
        self.calls: Counter[tuple[str, int]] | None = None
        #: set when the command's budget kept trials from starting: they have no record
        self.budget: BudgetStop | None = None
        for r in reused:
            self._count(r)
            self.n_reused += 1

    @property
    def n_tasks(self) -> int:
        return len(self._tasks)

    @property
    def n_final(self) -> int:
        """Trials final so far: reused, ran and graded."""
        return self.n_reused + self.n_ran + self.n_graded

    def add(self, records: Iterable[TrialRecord]) -> None:
        """Trials this run finished: ran (their target ran here) or graded (an awaiting
        stored rollout)."""
        for r in records:
            self._count(r)
            if (r.task_id, r.trial) in self._awaiting:
                self.n_graded += 1
            else:
                self.n_ran += 1

    def count_calls(self, calls: Counter[tuple[str, int]]) -> None:
        """The run's target calls, from its call journal: a trial called twice (its Dask
        worker was lost before its rollout was stored) counts twice."""
        self.calls = calls

    @property
    def n_calls(self) -> int:
        """Target calls of this run, repeats included."""
        return self.n_ran if self.calls is None else sum(self.calls.values())

    def repeats(self) -> dict[str, int]:
        """Per task id, the calls of its trials beyond the first of each (none: absent)."""
        out: Counter[str] = Counter()
        for (task_id, _), n in (self.calls or Counter()).items():
            if n > 1:
                out[task_id] += n - 1
        return dict(sorted(out.items()))

    def _count(self, r: TrialRecord) -> None:
        slots = self._tasks[r.task_id]
        slots.put(r)
        slots.done += 1
        self.statuses[r.status] += 1

    # -- the result's inputs ------------------------------------------------------------------

    @property
    def n_not_started(self) -> int:
        """Trials without a record: the budget kept them from starting."""
        return sum(s.statuses.count(None) for s in self._tasks.values())

    def task_trials(self) -> list[TaskTrials]:
        """The input of :func:`honesteval.stats.aggregate`: each task's trials in order, with
        the feedback of its last trial that has any. Every trial must be there (added, reused
        or awaiting), unless the budget kept it from starting (:attr:`budget`): then it is
        left out, missing data (a task none of whose trials ran is not scored)."""
        out = []
        for task_id, slots in self._tasks.items():
            statuses, rewards = slots.statuses, slots.rewards
            if None in statuses:
                missing = [k for k, status in enumerate(statuses) if status is None]
                if self.budget is None:
                    raise ValueError(f"task {task_id!r}: trials {missing[:5]} have no record")
                statuses = [s for s in statuses if s is not None]
                rewards = [r for k, r in enumerate(rewards) if k not in missing]
            out.append(
                TaskTrials(
                    id=task_id,
                    cluster=slots.cluster,
                    statuses=statuses,  # type: ignore[arg-type]  # all set
                    rewards=rewards,
                    feedback=slots.last_feedback(),
                )
            )
        return out

    def usage(self) -> dict[str, Any]:
        """What the trials used: seconds per evaluation step, tokens and cost (None: no trial
        says), summed in task and trial order."""
        tokens = [t for s in self._tasks.values() for t in s.tokens or () if t is not None]
        costs = [c for s in self._tasks.values() for c in s.cost or () if c is not None]
        step_seconds: dict[str, float] = {}
        for s in self._tasks.values():
            for steps in s.steps or ():
                for step, seconds in steps or ():
                    step_seconds[step] = step_seconds.get(step, 0.0) + seconds
        return {
            "tokens": sum(tokens) if tokens else None,
            "cost": sum(costs) if costs else None,
            "step_seconds": step_seconds or None,
        }

    # -- running counts -----------------------------------------------------------------------

    def _finished(self) -> list[_TaskSlots]:
        return [s for s in self._tasks.values() if s.done >= self.n_trials]

    def coverage(self) -> tuple[int, int]:
        """(scored, finished) tasks so far."""
        finished = self._finished()
        scored = sum(any(st in COUNTED_STATUSES for st in s.statuses) for s in finished)
        return scored, len(finished)

    def reward(self) -> float | None:
        means = []
        for s in self._finished():
            counted = s.counted_rewards()
            if counted:
                means.append(sum(counted) / len(counted))
        return sum(means) / len(means) if means else None

    def below(self, min_coverage: float) -> bool:
        """Coverage so far is below ``min_coverage``, once enough tasks have finished to say
        so (five, or all of them): the first task alone is a coin, not a trend."""
        scored, finished = self.coverage()
        return finished >= min(self.n_tasks, WARN_AFTER_TASKS) and scored / finished < min_coverage

    def line(self) -> str:
        done = sum(self.statuses.values())
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.statuses.items()))
        scored, finished = self.coverage()
        cov = f"{scored / finished:.2f}" if finished else "n/a"
        reward = self.reward()
        return (
            f"{done}/{self.n_tasks * self.n_trials} trials done ({counts or 'none yet'}); "
            f"coverage so far {cov} ({scored}/{finished} finished tasks scored); "
            f"running reward {'n/a' if reward is None else f'{reward:.3f}'}"
        )
