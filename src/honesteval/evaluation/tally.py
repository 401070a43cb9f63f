"""Running counts while an evaluation goes: statuses, coverage so far, running reward.

Plain Python (the flow logs :meth:`RunningTally.line` every few seconds). Coverage so far is
over the tasks whose trials have all finished: a task with at least one counted trial (``ok``,
or ``failed``: the candidate's own failure at ``failure_reward``) is scored, like in the final
result. The running reward is the mean over scored finished tasks of their mean counted
reward (the estimator of the final result, before its SE).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from honesteval.models import COUNTED_STATUSES, TrialRecord

WARN_AFTER_TASKS = 5


class RunningTally:
    """Counts of one evaluation's finished trials (reused ones included)."""

    def __init__(self, n_tasks: int, n_trials: int, records: Iterable[TrialRecord] = ()):
        self.n_tasks = n_tasks
        self.n_trials = n_trials
        self.statuses: Counter[str] = Counter()
        self._per_task: dict[str, list[TrialRecord]] = {}
        self.add(records)

    def add(self, records: Iterable[TrialRecord]) -> None:
        for r in records:
            self.statuses[r.status] += 1
            self._per_task.setdefault(r.task_id, []).append(r)

    def _finished(self) -> list[list[TrialRecord]]:
        return [rs for rs in self._per_task.values() if len(rs) >= self.n_trials]

    def coverage(self) -> tuple[int, int]:
        """(scored, finished) tasks so far."""
        finished = self._finished()
        return sum(any(r.status in COUNTED_STATUSES for r in rs) for rs in finished), len(finished)

    def reward(self) -> float | None:
        means = []
        for rs in self._finished():
            ok = [r.reward for r in rs if r.status in COUNTED_STATUSES and r.reward is not None]
            if ok:
                means.append(sum(ok) / len(ok))
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
