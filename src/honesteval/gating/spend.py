"""What the trials still to run are expected to cost, from the costs measured so far.

A target or scorer may report each trial's ``cost`` (USD) and ``tokens``; the stored trials
of the newest val result of every candidate are the measurements. Their mean a trial, times
the trials a screen or a confirmation would run, is what ``plan`` and the gate's notice
show. Trials that report nothing are not counted as free: they are left out of the mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from honesteval.evaluation.budget import spent_text
from honesteval.gating.ledger import search_ledger
from honesteval.models import GateDecision, SplitResult
from honesteval.project.loader import Project
from honesteval.store.reading import trials_of
from honesteval.store.state_dir import Store


@dataclass(frozen=True)
class TrialCost:
    """The mean cost and tokens of a trial, over the ``n_measured`` stored trials that
    reported them (None: no trial did)."""

    usd: float | None
    tokens: float | None
    n_measured: int

    def of(self, trials: int) -> str:
        """What ``trials`` more trials are expected to cost, in words.

        >>> TrialCost(0.002, 1500.0, 40).of(90)
        '~$0.18, ~135,000 tokens (90 trials at the mean of 40 measured)'
        >>> TrialCost(None, None, 0).of(90)
        'unknown (90 trials; no stored trial reported its cost or tokens)'
        """
        if self.n_measured == 0:
            return f"unknown ({trials} trials; no stored trial reported its cost or tokens)"
        parts = [] if self.usd is None else [f"~${self.usd * trials:,.2f}"]
        if self.tokens is not None:
            parts.append(f"~{self.tokens * trials:,.0f} tokens")
        return f"{', '.join(parts)} ({trials} trials at the mean of {self.n_measured} measured)"


def confirmation_trials_at_most(n_tasks: int, trials_per_task: int) -> int:
    """The trials a confirmation runs at most: both sides, fresh, on every task.

    >>> confirmation_trials_at_most(12, 30)
    720
    """
    return 2 * n_tasks * trials_per_task


def measured_trial_cost(project: Project) -> TrialCost:
    """The mean cost and tokens a trial, over the stored trials of the newest val result of
    every candidate that reported them."""
    store = Store(project.state_dir)
    costs: list[float] = []
    tokens: list[int] = []
    measured = 0
    for result in store.read_latest_results("val").values():
        for task in trials_of(store, result):
            for record in task.records:
                if record is None or (record.cost is None and record.tokens is None):
                    continue
                measured += 1
                if record.cost is not None:
                    costs.append(record.cost)
                if record.tokens is not None:
                    tokens.append(record.tokens)
    return TrialCost(
        usd=sum(costs) / len(costs) if costs else None,
        tokens=sum(tokens) / len(tokens) if tokens else None,
        n_measured=measured,
    )


def budget_decision(
    project: Project, decision: GateDecision, results: Sequence[SplitResult]
) -> GateDecision | None:
    """The gate's decision when the budget kept trials of ``results`` from starting: INDECISIVE,
    saying what ran, what was spent and what the rest would cost (None: nothing was kept
    from starting). Nothing is promoted on part of the trials."""
    stopped = [r.budget for r in results if r.budget is not None]
    if not stopped:
        return None
    planned = sum(r.trials_planned for r in results)
    missing = sum(r.trials_not_started for r in results)
    reason = (
        f"budget reached: {planned - missing} of {planned} trials ({spent_text(stopped[-1])}). "
        f"The {missing} not started would cost {measured_trial_cost(project).of(missing)}; "
        "rerun with a larger budget: stored trials are reused, nothing is paid twice."
    )
    update = {
        "accept": False,
        "indecisive": True,
        "promoted": False,
        "reason": reason,
        "budget": stopped[-1],
    }
    return decision.model_copy(update=update)


def spent_since(
    project: Project, runs: Sequence[tuple[Sequence[SplitResult], str]]
) -> tuple[float | None, int | None]:
    """What the stored trials of each (results, since) of ``runs`` that started at ``since``
    or later reported: (dollars, tokens), None where none reported it. A gate's spend (the
    trials it reused started before it and cost it nothing)."""
    store = Store(project.state_dir)
    seen: set[tuple[str, str, str, int]] = set()
    costs: list[float] = []
    tokens: list[int] = []
    for results, since in runs:
        for result, task in ((res, t) for res in results for t in trials_of(store, res)):
            for r in task.records:
                if r is None or r.started_at < since:
                    continue
                key = (result.candidate, result.fingerprint, task.task_id, r.seed)
                if key in seen:
                    continue
                seen.add(key)
                spent = r.spent  # a batched call is paid in full by the trial that made it
                if spent.cost is not None:
                    costs.append(spent.cost)
                if spent.tokens is not None:
                    tokens.append(spent.tokens)
    return (sum(costs) if costs else None), (sum(tokens) if tokens else None)


def search_spent(project: Project) -> tuple[float, int]:
    """What the search spent so far: the sum of its recorded decisions' ``spent_usd`` and
    ``spent_tokens`` (decisions from before spend was recorded count nothing)."""
    decisions = search_ledger(project).decisions
    return (
        sum(d.spent_usd or 0.0 for d in decisions),
        sum(d.spent_tokens or 0 for d in decisions),
    )
