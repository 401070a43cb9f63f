"""Run evaluations in this process on a thread pool: no Prefect, the same trial code.

What the Python API's ``orchestration="local"`` uses, and what every caller uses when no
target has to run (only stored rollouts to grade, or nothing at all): the same functions as
the Prefect tasks (:func:`run_trial_with_retries`, :func:`grade_isolated`), so a trial's
record is the same byte for byte whoever ran it.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed

from honesteval import interrupts
from honesteval.adapters import Adapter
from honesteval.evaluation import progress
from honesteval.evaluation.budget import SpendGuard
from honesteval.evaluation.plan import (
    EvaluationPlan,
    adapter_for,
    finish_tally,
    finish_without_targets,
    raise_if_stopped,
    tally_of,
)
from honesteval.evaluation.trial import (
    TrialSettings,
    TrialSpec,
    grade_isolated,
    run_trial_with_retries,
)
from honesteval.models import SplitResult, TrialRecord


def _trial_within(
    guard: SpendGuard | None,
    turn: int,
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
) -> TrialRecord | None:
    """Run the trial, the ``turn``-th planned, unless the budget is reached when its turn
    comes (None: never started, no record)."""
    if guard is not None and not guard.admit(turn):
        return None
    if guard is not None and interrupts.requested():
        guard.release()  # stopping (Ctrl-C) while it waited for its turn
        return None
    return run_trial_with_retries(adapter, spec, settings)


def run_plans_locally(
    plans: Sequence[EvaluationPlan],
    *,
    max_concurrency: int | None = None,
    guard: SpendGuard | None = None,
) -> list[SplitResult]:
    """Run every planned trial and grade every stored rollout awaiting its score (at most
    ``max_concurrency`` at once, default the first project's), then aggregate and store each
    plan's result; returns them in order. With a ``guard``, a trial starts only while it
    fits the budget; the ones that never started are missing data in the results."""
    if not plans:
        return []
    workers = max_concurrency or plans[0].project.config.max_concurrency
    tallies = [tally_of(plan) for plan in plans]  # each trial tallied as it finishes
    if guard is not None:
        guard.measure(r for plan in plans for r in plan.reused.values())
    # A run of its own (an earlier run's stop or full disk is forgotten, unless a command
    # around it is the run): Ctrl-C and a full disk stop it as they stop a flow's trials.
    with (
        interrupts.stop_on_signals(),
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="honesteval-trial") as pool,
    ):
        owner: dict[Future[TrialRecord | None], tuple[int, bool]] = {}
        turn = 0
        for i, plan in enumerate(plans):
            if not (plan.todo or plan.to_score):
                continue
            adapter = adapter_for(plan.project, plan.settings.scoring)
            for spec in plan.todo:
                ran = pool.submit(_trial_within, guard, turn, adapter, spec, plan.settings)
                owner[ran], turn = (i, True), turn + 1
            for spec, stored in plan.to_score:
                graded: Future[TrialRecord | None] = pool.submit(
                    grade_isolated, adapter, spec.task, stored, plan.settings
                )
                owner[graded] = (i, False)
        labels = [progress.label_of(plan.candidate, plan.split) for plan in plans]
        for plan, label in zip(plans, labels, strict=True):
            progress.begin(label, plan.trials_planned, (r.status for r in plan.reused.values()))
        try:
            for fut in as_completed(owner):
                i, guarded = owner.pop(fut)  # a done future holds its record: let it go
                try:
                    record = fut.result()
                except (OSError, interrupts.TrialAbandoned):
                    if guard is not None and guarded:
                        guard.release()
                    if not interrupts.requested():
                        raise
                    continue  # stopping: nothing recorded for it
                if record is None:
                    continue  # the budget kept it from starting
                if guard is not None and guarded:
                    guard.settle([record])
                tallies[i].add([record])
                progress.trial_ran(labels[i], record.status)
        except BaseException:
            if guard is not None:
                guard.stop()  # a trial still waiting for its turn gives up
            raise
        finally:
            for label in labels:
                progress.end(label)
        raise_if_stopped(plans)
        if guard is not None:
            guard.mark(tallies)
    return [finish_tally(plan, tally) for plan, tally in zip(plans, tallies, strict=True)]


def nothing_to_run(plan: EvaluationPlan) -> bool:
    """No target has to run: every trial is stored (some may still await their score)."""
    return not plan.todo


def all_reused(plan: EvaluationPlan, max_concurrency: int | None = None) -> SplitResult:
    """Every target run is already on disk: grade the stored rollouts still awaiting their
    score (``plan.to_score``), aggregate and store the result, in this process, no Prefect
    (:func:`finish_without_targets`).

    Starting or calling a Prefect server would cost seconds and record a flow run that runs
    nothing (issue 28 §2); the run that produced the trials stays the one the UI shows.
    """
    return finish_without_targets(plan, max_concurrency or plan.project.config.max_concurrency)
