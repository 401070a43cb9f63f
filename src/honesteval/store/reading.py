"""Read what a project stored, for looking at it: latest results, their trials, status counts.

``compare``, ``export`` and ``report`` read through here and never run anything. Trials are
read with :meth:`Store.read_trials` for exactly the (task, seed) pairs a stored result was
aggregated from, so the views see the same trials the numbers came from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import get_args

from honesteval.models import GateDecision, SplitResult, TrialRecord, TrialStatus
from honesteval.store.state_dir import Store

#: Known statuses in their documented order; a status this list does not know yet sorts last.
_STATUS_ORDER = {s: i for i, s in enumerate(get_args(TrialStatus))}


def ordered_statuses(statuses: Iterable[str]) -> list[str]:
    """The distinct statuses present, in the documented order (unknown ones last, by name).

    >>> ordered_statuses(["scorer_error", "ok", "failed", "ok"])
    ['ok', 'scorer_error', 'failed']
    """
    return sorted(set(statuses), key=lambda s: (_STATUS_ORDER.get(s, len(_STATUS_ORDER)), s))


def status_counts(statuses: Iterable[str]) -> dict[str, int]:
    """How many trials ended in each status that occurs (statuses never seen are absent)."""
    counts = Counter(statuses)
    return {s: counts[s] for s in ordered_statuses(counts)}


def result_status_counts(result: SplitResult) -> dict[str, int]:
    """Trial counts by status over every task of a result, from its per-task statuses."""
    return status_counts(s for t in result.per_task for s in t.statuses)


def latest_results(store: Store, split: str) -> dict[str, SplitResult]:
    """The newest stored result of every candidate on ``split``, by candidate name."""
    out: dict[str, SplitResult] = {}
    for result in store.read_results():  # oldest first: later ones overwrite
        if result.split == split:
            out[result.candidate] = result
    return out


def decided_on(store: Store, decision: GateDecision) -> list[SplitResult]:
    """The stored val results a gate decision was just made on (for a confirmed decision,
    the confirmation's): each side's newest result of the version it decided on. A side
    whose newest result is of another version (edited since, or gated again) is left out."""
    newest = store.read_latest_results("val")
    sides = [(decision.current, decision.current_fingerprint)] if decision.current else []
    sides.append((decision.candidate, decision.candidate_fingerprint))
    return [
        newest[name]
        for name, fingerprint in sides
        if name in newest and newest[name].fingerprint == fingerprint
    ]


@dataclass(frozen=True)
class TaskTrialRecords:
    """The stored trial records of one task of a result, in trial order (None: not stored)."""

    task_id: str
    records: list[TrialRecord | None]


def trials_of(
    store: Store, result: SplitResult, only: Collection[str] | None = None
) -> list[TaskTrialRecords]:
    """Every trial a result was aggregated from, read back from disk, task by task (``only``:
    just these tasks, and only their records are held while the log is read)."""
    tasks = [t for t in result.per_task if only is None or t.id in only]
    seeds = {t.id: result.seeds(t.id) for t in tasks}
    wanted = {(t, s) for t, task_seeds in seeds.items() for s in task_seeds}
    stored = {
        key: record
        for key, record in store.iter_trials(result.split, result.candidate, result.fingerprint)
        if key in wanted
    }
    return [
        TaskTrialRecords(task.id, [stored.get((task.id, s)) for s in seeds[task.id]])
        for task in tasks
    ]


def not_ok_trials(store: Store, result: SplitResult) -> list[TrialRecord]:
    """The stored trials of ``result`` that did not end ``ok`` (failed, infra_error,
    scorer_error), by task and seed; only the tasks with such a trial are read."""
    bad = {t.id for t in result.per_task if any(s != "ok" for s in t.statuses)}
    if not bad:
        return []
    records = [r for task in trials_of(store, result, only=bad) for r in task.records if r]
    return sorted((r for r in records if r.status != "ok"), key=lambda r: (r.task_id, r.seed))
